package proxy

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/config"
	"modelgate/cors"
	"modelgate/wsmode"
)

// The Responses WebSocket mode (GET /v1/responses with an upgrade) is served by package
// wsmode; this is its HTTP face: the route, the upgrade's checks in the /v1 group's order
// (drain, authentication), the browser origin, and the per-key cap. Each turn then comes back
// through this engine as a POST /v1/responses, so it takes the one preflight and lifecycle; a
// message that asks the model nothing (generate: false) is admitted by prepareRoutes
// (websocket_prepare.go) before wsmode serves it.

// websocketRoute is the upgrade's route name in logs and metrics.
const websocketRoute = "/v1/responses (websocket)"

// turnHeaders are the upgrade's headers each turn is sent with: the credentials, and what a
// client says once for all its requests (its tags, its trace, its session).
var turnHeaders = []string{"Authorization", "X-Api-Key", "User-Agent", "X-Modelgate-Tags", "Traceparent", "Tracestate",
	headerSessionAffinity, headerSessionID, headerSessionIDPlain}

// newSockets is the WebSocket server of a config (read at start: its caps and ages are not
// reloaded).
func newSockets(s *Server, cfg *config.Config) *wsmode.Server {
	return wsmode.New(wsmode.Options{
		Turns:      http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.engine.ServeHTTP(w, r) }),
		Prepares:   s.prepareRoutes(),
		Kept:       func() bool { return s.keeper != nil && s.state().cfg.Responses.StoreLocal() },
		PerKey:     int(cfg.WebSocketConnections()),
		Lanes:      int(cfg.WebSocketLanes()),
		MaxAge:     cfg.Server.WebSocketMaxAge,
		PingEvery:  cfg.Server.WebSocketPingInterval,
		MaxMessage: cfg.Server.MaxBodyBytes,
		Log:        s.log,
		Now:        s.now,
		Room:       socketRoom{s},
	})
}

// socketRoom charges queued WebSocket messages to the room request bodies take, under the
// budget of the config serving now (server.max_inflight_body_bytes).
type socketRoom struct{ s *Server }

func (r socketRoom) TryTake(n int64) bool {
	return r.s.bodies.TryTake(n, int64(r.s.state().cfg.Server.MaxInflightBodyBytes))
}

func (r socketRoom) Force(n int64) { r.s.bodies.Force(n) }
func (r socketRoom) Give(n int64)  { r.s.bodies.Give(n) }

// responsesSocket upgrades GET /v1/responses to the WebSocket mode.
func (s *Server) responsesSocket(c *gin.Context) {
	info(c).Route = websocketRoute
	if !strings.EqualFold(c.GetHeader("Upgrade"), "websocket") {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "websocket_upgrade_required", "",
			"GET /v1/responses opens the Responses WebSocket mode and needs a WebSocket upgrade; create a response over HTTP with POST /v1/responses.")
		return
	}
	if origin := c.GetHeader("Origin"); origin != "" && !socketOriginAllowed(s.state().cfg.Server.CORSOrigins, origin) {
		abortError(c, http.StatusForbidden, typeInvalidRequest, "origin_not_allowed", "",
			"This origin may not open a WebSocket here: add it to server.cors_origins.")
		return
	}
	p := principal(c)
	release, ok := s.sockets.Admit(p.ScopeID)
	if !ok {
		apierr.Refuse(c, http.StatusTooManyRequests, "requests", "websocket_connections_exceeded",
			"This key has as many WebSocket connections open as limits.websocket_connections allows; close one or use HTTP.", 0)
		return
	}
	who := wsmode.Caller{Scope: p.ScopeID, Header: http.Header{}, RemoteAddr: c.Request.RemoteAddr}
	who.Closed = socketEndOf(info(c)).closed
	for _, h := range turnHeaders {
		if v := c.Request.Header.Values(h); len(v) > 0 {
			who.Header[h] = v
		}
	}
	s.sockets.Serve(c.Writer, c.Request, who, release)
}

// socketOriginAllowed: a browser's upgrade is allowed from the origins CORS allows (none
// when server.cors_origins is empty).
func socketOriginAllowed(origins []string, origin string) bool {
	return len(origins) > 0 && cors.OriginAllowed(origins, origin)
}

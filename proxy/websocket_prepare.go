package proxy

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/reqlog"
)

// A WebSocket message with generate: false asks the model nothing (wsmode serves it from the
// connection's own memory), yet it is a request: one connection could otherwise send tens of
// thousands a second, unlimited, unlogged, and after its key was revoked. wsmode asks the
// handler below before it serves one, in the message's turn, so a refusal keeps its place
// among the connection's answers.

// prepareRoute names a generate: false message in the access log and the metrics: a route
// value of its own keeps these instant answers out of /v1/responses' durations, and tells
// them apart from turns.
const prepareRoute = "/v1/responses (generate: false)"

// prepareRoutes is the handler wsmode.Options.Prepares: an engine of its own that no client
// can reach (it is never served on a listener), with the checks of a turn cheapest first:
// the drain, the key (again: a key revoked or expired while the connection is open is
// refused), then one request of the key's and team's request limits. It answers 204 to let
// the message through; a refusal is the answer the same POST /v1/responses would get.
//
// A real turn never comes here: it is admitted by the preflight of POST /v1/responses, so
// it is counted once.
func (s *Server) prepareRoutes() *gin.Engine {
	e := newEngine()
	e.Use(s.observePrepare, s.recoverer)
	e.POST("/v1/responses", s.refuseWhileDraining, s.authenticate, s.admitPrepare)
	return e
}

// observePrepare is observe for a generate: false message: its record, its one access-log
// line and metrics record when it is answered. It opens no trace: a span per message would
// drown the spans of the turns, which carry the work.
func (s *Server) observePrepare(c *gin.Context) {
	ri := &requestInfo{Record: reqlog.Record{Start: time.Now(), RequestID: newRequestID(), Route: prepareRoute, Transport: "websocket"},
		limits: s.limiter}
	c.Set(infoKey, ri)
	c.Header("X-Request-Id", ri.RequestID)
	if s.hooks.RequestStarted != nil {
		s.hooks.RequestStarted()
	}
	c.Next()
	s.finish(c, ri)
}

// admitPrepare counts the message as one request of its key and team: no tokens are
// reserved (none are used) and no concurrency slot is held, as none is for any time. The
// ticket is released at once: the request stays counted, nothing else is charged.
func (s *Server) admitPrepare(c *gin.Context) {
	req := accounting.LookupRequest(principal(c))
	ticket, d, err := s.limiter.Admit(c.Request.Context(), req)
	if ticket = s.admitted(c, ticket, d, err); ticket == nil {
		return
	}
	ticket.Release()
	c.Status(http.StatusNoContent)
}

package proxy

import (
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/config"
	"modelgate/reqbody"
)

// bodyRoomWait is how long a body may wait for room in server.max_inflight_body_bytes
// before it is refused with 503: long enough for the bodies in flight to reach the platform
// and give theirs back, short enough that a client is not left hanging by a flood.
const bodyRoomWait = time.Second

// bodyLimits are the bounds of a /v1 request body under the config serving now (a reload
// applies to the requests after it), with the inflating room and the room for bodies held
// that this server's requests share.
func (s *Server) bodyLimits(cfg *config.Config) reqbody.Limits {
	return reqbody.Limits{
		MaxBytes:     cfg.Server.MaxBodyBytes,
		MaxInflating: cfg.Server.MaxInflatingBytes,
		Timeout:      cfg.Server.BodyReadTimeout,
		Budget:       &s.inflating,
		Room:         &s.bodies,
		MaxInflight:  int64(cfg.Server.MaxInflightBodyBytes),
		RoomWait:     bodyRoomWait,
	}
}

// InflightBodyBytes is the room request bodies and queued WebSocket messages hold now
// (modelgate_inflight_body_bytes).
func (s *Server) InflightBodyBytes() int64 { return s.bodies.Used() }

// readJSONBody reads the whole request body within l (see reqbody.Read); the room it holds
// is the request's (requestInfo.held). On failure it has answered the client in the route's
// shape.
// readCallBody is readJSONBody with the server's limits, built in a frame of its own: the
// limits are a dozen words, and built in checkCall they would sit in the frame the dialect's
// parse runs under (TestOpenStreamStack).
//
//go:noinline
func (s *Server) readCallBody(c *gin.Context, cfg *config.Config) ([]byte, bool) {
	return readJSONBody(c, s.bodyLimits(cfg))
}

func readJSONBody(c *gin.Context, l reqbody.Limits) ([]byte, bool) {
	l.Held = &info(c).held
	body, err := reqbody.Read(c.Writer, c.Request, l)
	if err != nil {
		bodyRefused(c, err)
		return nil, false
	}
	return body, true
}

// bodyRefused answers a body reqbody did not read, in the route's shape (abortOpenAI turns
// to Anthropic's on the Messages routes), and notes on the request's record what the access
// log and metrics tell apart: a refusal for want of inflating room, a client that left.
func bodyRefused(c *gin.Context, err error) {
	e := reqbody.Reason(err)
	status := e.Kind.Status()
	switch e.Kind {
	case reqbody.TooLarge:
		abortError(c, status, typeInvalidRequest, "request_too_large", "",
			"Request body too large: the limit is "+apierr.FormatBytes(e.Limit)+".")
	case reqbody.TimedOut:
		abortError(c, status, typeInvalidRequest, "request_timeout", "",
			"The request body did not arrive in time.")
	case reqbody.UnsupportedEncoding:
		abortError(c, status, typeInvalidRequest, "unsupported_content_encoding", "",
			"Unsupported Content-Encoding: only gzip request bodies are accepted.")
	case reqbody.Busy:
		// Refused mid-body, the rest not waited for: counted with the limits' refusals.
		info(c).Refusal = "inflating" // server.max_inflating_bytes
		c.Header("Retry-After", "1")
		abortError(c, status, typeServer, "server_busy", "",
			"modelgate is inflating too many compressed request bodies at once; retry shortly, or send this one uncompressed.")
	case reqbody.NoRoom:
		// Refused before anything went upstream, the rest not waited for: counted with the
		// limits' refusals.
		info(c).Refusal = "body_memory" // server.max_inflight_body_bytes
		c.Header("Retry-After", "1")
		abortError(c, status, typeServer, "server_busy", "",
			"modelgate holds as many request bodies as it has memory for; retry shortly.")
	case reqbody.BadGzip:
		abortError(c, status, typeInvalidRequest, "invalid_body", "", "The request body is not valid gzip data.")
	default:
		if e.Kind == reqbody.ClientGone {
			info(c).ClientClosed = true
		}
		abortError(c, status, typeInvalidRequest, "invalid_body", "", "The request body could not be read.")
	}
}

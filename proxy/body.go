package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/config"
	"modelgate/reqbody"
)

// bodyLimits are the bounds of a /v1 request body under the config serving now
// (reqbody.LimitsOf), with this server's inflating room and room for bodies held.
func (s *Server) bodyLimits(cfg *config.Config) reqbody.Limits {
	return reqbody.LimitsOf(cfg, &s.inflating, &s.bodies)
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
		apierr.BodyRefused(c, err)
		return nil, false
	}
	return body, true
}

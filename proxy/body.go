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
		apierr.BodyRefused(c, err)
		return nil, false
	}
	return body, true
}

package reqbody

import (
	"time"

	"modelgate/config"
)

// RoomWait is how long a body may wait for room in server.max_inflight_body_bytes before it
// is refused with 503: long enough for the bodies in flight to reach the platform and give
// theirs back, short enough that a client is not left hanging by a flood.
const RoomWait = time.Second

// LimitsOf are the bounds of a request body under cfg (a reload applies to the requests
// after it), with the inflating room and the room for bodies held that a server's requests
// share.
func LimitsOf(cfg *config.Config, inflating *Budget, bodies *Room) Limits {
	return Limits{
		MaxBytes:     cfg.Server.MaxBodyBytes,
		MaxInflating: cfg.Server.MaxInflatingBytes,
		Timeout:      cfg.Server.BodyReadTimeout,
		Budget:       inflating,
		Room:         bodies,
		MaxInflight:  int64(cfg.Server.MaxInflightBodyBytes),
		RoomWait:     RoomWait,
	}
}

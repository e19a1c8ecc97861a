package store

import (
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/config"
)

// Open picks the store the config implies: Redis when the rate limiter shares its counters
// through Redis (replicas must then share these records too), the embedded file otherwise.
func Open(rl config.Ratelimit, now func() time.Time) (Store, error) {
	if strings.HasPrefix(rl.Store, "redis://") || strings.HasPrefix(rl.Store, "rediss://") {
		o, err := redis.ParseURL(rl.Store)
		if err != nil {
			// The URL may hold a password: it is left out of the message.
			return nil, errors.New("store: ratelimit.store: not a valid redis:// URL")
		}
		return NewRedis(redis.NewClient(o)), nil
	}
	return OpenBolt(rl.DataPath, BoltOptions{Now: now})
}

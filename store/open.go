package store

import (
	"time"

	"modelgate/config"
	"modelgate/redisconn"
)

// redisTimeout bounds each store command, as the rate limiter's store timeout does its own.
const redisTimeout = 2 * time.Second

// Open picks the store the config implies: Redis (single server, Sentinel or Cluster) when
// the rate limiter shares its counters through Redis, since replicas must then share these
// records too; the embedded file otherwise. guard is the Redis store's breaker, shared with
// the limiter's client of the same Redis (nil: one of the store's own).
func Open(rl config.Ratelimit, now func() time.Time, guard *redisconn.Guard) (Store, error) {
	if redisconn.IsRedis(rl.Store) {
		c, err := redisconn.New(rl, redisTimeout, guard)
		if err != nil {
			return nil, err
		}
		return NewRedis(c), nil
	}
	return OpenBolt(rl.DataPath, BoltOptions{Now: now})
}

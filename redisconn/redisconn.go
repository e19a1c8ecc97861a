// Package redisconn builds modelgate's one kind of Redis client from its config: a single
// server (store: redis://... or store: redis with one address), a Sentinel-managed master or
// a Redis Cluster, all behind go-redis's UniversalClient. Everything modelgate shares between
// replicas (rate-limit counters, asset owners, stored records) connects through here, so the
// topologies and the timeouts are decided once.
package redisconn

import (
	"crypto/tls"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/config"
)

// Client is a connection to whichever topology the config names.
type Client struct {
	redis.UniversalClient
	// Cluster is true for Redis Cluster: multi-key commands and scripts must keep their keys
	// in one hash slot (see HashTag).
	Cluster bool
	// Guard is the store breaker every command of the client goes through.
	Guard *Guard
}

// IsRedis reports whether a ratelimit.store value selects Redis.
func IsRedis(store string) bool {
	return store == "redis" || strings.HasPrefix(store, "redis://") || strings.HasPrefix(store, "rediss://")
}

// New connects as r describes (store and the redis block), bounding every dial, read, write
// and wait for a pooled connection by timeout, and sending every command through guard (the
// store's breaker and the request's budget; nil: a guard of this client's own). Clients of
// one Redis share one Guard, so that one of them finding it hung spares the others the
// wait. It does not contact Redis: a Redis that is down at start must not keep modelgate
// from starting.
//
// Commands are never retried by the client (MaxRetries -1): modelgate's scripts are not
// idempotent, and a retry after a lost reply would charge twice. Callers that can make a
// write idempotent retry it themselves.
func New(r config.Ratelimit, timeout time.Duration, guard *Guard) (*Client, error) {
	var o redis.UniversalOptions
	switch {
	case strings.HasPrefix(r.Store, "redis://") || strings.HasPrefix(r.Store, "rediss://"):
		u, err := redis.ParseURL(r.Store)
		if err != nil {
			// The URL may hold a password; the parser's message does not echo it, but the
			// URL is left out all the same.
			return nil, errors.New("redisconn: store: not a valid redis:// URL")
		}
		o = redis.UniversalOptions{
			Addrs: []string{u.Addr}, Username: u.Username, Password: u.Password, DB: u.DB, TLSConfig: u.TLSConfig,
		}
	case r.Store == "redis":
		c := r.Redis
		if len(c.Addrs) == 0 {
			return nil, errors.New("redisconn: ratelimit.redis.addrs is empty")
		}
		o = redis.UniversalOptions{
			Addrs: c.Addrs, Username: c.Username, Password: c.Password, DB: c.DB,
			MasterName: c.SentinelMaster, IsClusterMode: c.Cluster,
		}
		if c.TLS {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	default:
		return nil, errors.New("redisconn: store is not redis")
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
	o.MaxRetries = -1
	// One dial attempt: during an outage on_store_error should apply at once, not after
	// several dial timeouts.
	o.DialerRetries = 1
	// A context's deadline bounds the command too (go-redis ignores it otherwise): it is how
	// a request's store budget cuts a command short of the timeout.
	o.ContextTimeoutEnabled = true
	if guard == nil {
		guard = NewGuard(nil, nil)
	}
	rdb := redis.NewUniversalClient(&o)
	rdb.AddHook(guard.hook())
	return &Client{UniversalClient: rdb, Cluster: o.IsClusterMode, Guard: guard}, nil
}

// HashTag wraps tag in braces for use inside a key: Redis Cluster places every key with the
// same tag in one hash slot, which multi-key scripts need. Outside a cluster it returns "",
// so single-server and Sentinel deployments keep the key names they always had.
func (c *Client) HashTag(tag string) string {
	if !c.Cluster {
		return ""
	}
	return "{" + tag + "}:"
}

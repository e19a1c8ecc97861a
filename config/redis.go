package config

import (
	"fmt"
	"net"
	"strconv"
)

// redis checks the ratelimit.redis block: it is what store: redis connects with, and only that.
func (v *validator) redis(r *Ratelimit) {
	c := r.Redis
	given := len(c.Addrs) > 0 || c.Cluster || c.SentinelMaster != "" || c.Username != "" || c.Password != "" || c.DB != 0 || c.TLS
	if r.Store != "redis" {
		if given {
			v.fail("ratelimit.redis", "is used only with store: redis (store is %q)", redactedStore(r.Store))
		}
		return
	}
	if len(c.Addrs) == 0 {
		v.fail("ratelimit.redis.addrs", "store: redis needs at least one host:port")
	}
	for i, a := range c.Addrs {
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			v.fail(fmt.Sprintf("ratelimit.redis.addrs[%d]", i), "want host:port, got %q", a)
		}
	}
	switch {
	case c.Cluster && c.SentinelMaster != "":
		v.fail("ratelimit.redis.sentinel_master", "set cluster or sentinel_master, not both")
	case c.Cluster && c.DB != 0:
		v.fail("ratelimit.redis.db", "Redis Cluster has only database 0")
	case !c.Cluster && c.SentinelMaster == "" && len(c.Addrs) > 1:
		v.fail("ratelimit.redis.addrs", "several addresses need cluster: true or sentinel_master")
	}
	if c.DB < 0 {
		v.fail("ratelimit.redis.db", "must not be negative, got %d", c.DB)
	}
}

// topology describes the redis block for the summary, without credentials.
func (c Redis) topology() string {
	kind := "single server"
	switch {
	case c.Cluster:
		kind = "cluster"
	case c.SentinelMaster != "":
		kind = fmt.Sprintf("sentinel master %q", c.SentinelMaster)
	}
	s := fmt.Sprintf("%s at %v, db %d, tls %t", kind, c.Addrs, c.DB, c.TLS)
	if c.Password != "" {
		s += ", password set"
	}
	return s
}

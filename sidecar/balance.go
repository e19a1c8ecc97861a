package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	gocache "github.com/patrickmn/go-cache"
)

// balanceInfo serves GET balance/info. A fleet of sidecars polling the balance would
// otherwise multiply the platform's load, so successful answers are kept briefly per
// platform key, and concurrent misses for one key share a single upstream call.
func (r *Routes) balanceInfo(c *gin.Context) {
	if !noQuery(c) {
		return
	}
	call := callOf(c)
	fetch := func(ctx context.Context) reply {
		return r.fetch(ctx, call, "", BalancePath, nil)
	}
	ttl := call.Settings.BalanceCacheTTL
	if ttl <= 0 {
		fetch(c.Request.Context()).write(c)
		return
	}
	r.balance.get(c.Request.Context(), balanceCacheKey(call.Keys.Caller()), ttl, fetch).write(c)
}

// balanceCacheKey names a platform key in the cache without keeping the key itself.
func balanceCacheKey(platformKey string) string {
	sum := sha256.Sum256([]byte(platformKey))
	return hex.EncodeToString(sum[:])
}

type balanceCache struct {
	now   func() time.Time
	items *gocache.Cache // balanceCacheKey -> balanceEntry

	mu       sync.Mutex
	inflight map[string]*balanceCall
}

type balanceEntry struct {
	reply reply
	at    time.Time
}

type balanceCall struct {
	done  chan struct{}
	reply reply
}

func newBalanceCache(now func() time.Time) *balanceCache {
	// No janitor goroutine (cleanup interval 0): expired entries are swept on each store,
	// which bounds the cache by the number of keys seen within one TTL.
	return &balanceCache{now: now, items: gocache.New(gocache.NoExpiration, 0), inflight: map[string]*balanceCall{}}
}

// fresh returns the cached answer for key if it is younger than ttl by the injected clock.
func (b *balanceCache) fresh(key string, ttl time.Duration) (reply, bool) {
	v, ok := b.items.Get(key)
	if !ok {
		return reply{}, false
	}
	e := v.(balanceEntry)
	if b.now().Sub(e.at) >= ttl {
		return reply{}, false
	}
	return e.reply, true
}

func (b *balanceCache) get(ctx context.Context, key string, ttl time.Duration, fetch func(context.Context) reply) reply {
	if r, ok := b.fresh(key, ttl); ok {
		return r
	}
	b.mu.Lock()
	if r, ok := b.fresh(key, ttl); ok {
		b.mu.Unlock()
		return r
	}
	call, joined := b.inflight[key]
	if !joined {
		call = &balanceCall{done: make(chan struct{})}
		b.inflight[key] = call
	}
	b.mu.Unlock()

	if joined {
		select {
		case <-call.done:
			return call.reply
		case <-ctx.Done():
			return reply{clientGone: true, upstreamEr: "canceled"}
		}
	}
	// The leader's own departure must not fail the callers waiting on it; the call is still
	// bounded by the upstream deadline.
	call.reply = fetch(context.WithoutCancel(ctx))
	if call.reply.success {
		b.items.Set(key, balanceEntry{reply: call.reply, at: b.now()}, ttl)
		b.items.DeleteExpired()
	}
	b.mu.Lock()
	delete(b.inflight, key)
	b.mu.Unlock()
	close(call.done)
	return call.reply
}

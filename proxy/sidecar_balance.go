package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// balanceInfo serves GET balance/info. A fleet of sidecars polling the balance would
// otherwise multiply the platform's load, so successful answers are kept briefly per
// platform key, and concurrent misses for one key share a single upstream call.
func (sc *sidecar) balanceInfo(c *gin.Context) {
	if !noQuery(c) {
		return
	}
	st, p, ri := requestState(c), principal(c), info(c)
	fetch := func(ctx context.Context) sidecarReply {
		return sc.fetchPlatform(ctx, st, p, ri, balancePath, nil)
	}
	ttl := st.cfg.Sidecar.BalanceCacheTTL
	if ttl <= 0 {
		fetch(c.Request.Context()).write(c)
		return
	}
	sc.balance.get(c.Request.Context(), balanceCacheKey(p.PlatformKey.Reveal()), ttl, fetch).write(c)
}

// balanceCacheKey names a platform key in the cache without keeping the key itself.
func balanceCacheKey(platformKey string) string {
	sum := sha256.Sum256([]byte(platformKey))
	return hex.EncodeToString(sum[:])
}

// balanceCache is a plain map under the mutex rather than a cache library: the one it used
// (go-cache) linked encoding/gob for its save and load methods, and gob's package
// initialisation alone made about 0.2 MB of the binary resident in every process.
type balanceCache struct {
	now func() time.Time

	mu       sync.Mutex
	items    map[string]balanceEntry // balanceCacheKey -> the last successful answer
	inflight map[string]*balanceCall
}

type balanceEntry struct {
	reply sidecarReply
	at    time.Time
	ttl   time.Duration // the TTL in force when it was stored; a reload may change it
}

type balanceCall struct {
	done  chan struct{}
	reply sidecarReply
}

func newBalanceCache(now func() time.Time) *balanceCache {
	// No janitor goroutine: expired entries are swept on each store, which bounds the cache
	// by the number of keys seen within one TTL.
	return &balanceCache{now: now, items: map[string]balanceEntry{}, inflight: map[string]*balanceCall{}}
}

// fresh returns the cached answer for key if it is younger than ttl by the injected clock.
// The caller holds b.mu.
func (b *balanceCache) fresh(key string, ttl time.Duration) (sidecarReply, bool) {
	e, ok := b.items[key]
	if !ok || b.now().Sub(e.at) >= ttl {
		return sidecarReply{}, false
	}
	return e.reply, true
}

func (b *balanceCache) get(ctx context.Context, key string, ttl time.Duration, fetch func(context.Context) sidecarReply) sidecarReply {
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
			return sidecarReply{clientGone: true, upstreamEr: "canceled"}
		}
	}
	// The leader's own departure must not fail the callers waiting on it; the call is still
	// bounded by the upstream deadline.
	call.reply = fetch(context.WithoutCancel(ctx))
	b.mu.Lock()
	if call.reply.success {
		now := b.now()
		for k, e := range b.items {
			if now.Sub(e.at) >= e.ttl {
				delete(b.items, k)
			}
		}
		b.items[key] = balanceEntry{reply: call.reply, at: now, ttl: ttl}
	}
	delete(b.inflight, key)
	b.mu.Unlock()
	close(call.done)
	return call.reply
}

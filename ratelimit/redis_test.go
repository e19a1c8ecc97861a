package ratelimit

import (
	"context"
	"testing"
	"time"

	"modelgate/config"
)

// TestRedisCrashedReplicaSlotsExpire: slots held by a replica that stopped renewing them are
// free again after the lease TTL, while a live replica's renewed slots stay taken.
func TestRedisCrashedReplicaSlotsExpire(t *testing.T) {
	url := redisURL(t)
	c := newClock(start)
	live := newLimiter(t, Options{Store: url, Now: c.Now, LeaseTTL: 30 * time.Second})
	crashed := newLimiter(t, Options{Store: url, Now: c.Now, LeaseTTL: 30 * time.Second})
	req := Request{Key: keyScope("l", config.Limits{}), Team: teamScope("l", config.Limits{ConcurrentRequests: 2})}

	held, _ := mustAdmit(t, live, req)
	defer held.Settle(Usage{})
	if _, d := mustAdmit(t, crashed, req); !d.Allowed {
		t.Fatalf("second slot: %+v", d)
	}
	if _, d := mustAdmit(t, live, req); d.Allowed || d.Reason != ReasonConcurrency {
		t.Fatalf("both slots taken: %+v", d)
	}
	// The crashed replica's lease is never renewed; the live one renews on its schedule.
	c.Advance(20 * time.Second)
	if err := live.store.(*redisStore).renew(); err != nil {
		t.Fatal(err)
	}
	c.Advance(15 * time.Second)
	if _, d := mustAdmit(t, live, req); !d.Allowed {
		t.Fatalf("crashed replica's slot still counted: %+v", d)
	}
	if _, d := mustAdmit(t, live, req); d.Allowed {
		t.Fatal("renewed slot expired")
	}
}

// TestRedisScriptsReloadAfterFlush: a Redis that lost its script cache (restart, SCRIPT FLUSH)
// keeps working.
func TestRedisScriptsReloadAfterFlush(t *testing.T) {
	l := newLimiter(t, Options{Store: redisURL(t), Now: newClock(start).Now})
	req := Request{Key: keyScope("f", config.Limits{RequestsPerMinute: 5})}
	tk, _ := mustAdmit(t, l, req)
	tk.Settle(Usage{})
	if err := l.store.(*redisStore).rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	tk, d := mustAdmit(t, l, req)
	tk.Settle(Usage{InputTokens: 3})
	if !d.Allowed || d.Headers.RemainingRequests != 3 {
		t.Fatalf("after flush: %+v", d)
	}
	if u := usageOf(t, l, req.Key); u.DayInputTokens != 3 {
		t.Fatalf("settle after flush: %+v", u)
	}
}

// TestRedisOwnerExpiryIsRelative: Redis expires keys by its own clock, so an owner record is
// sent with how long it lives, never until when. With the injected clock hours away from
// Redis's, either way, the record lives exactly its hour: an absolute expiry would be gone at
// once (clock behind) or outlive its hour by days (clock ahead).
func TestRedisOwnerExpiryIsRelative(t *testing.T) {
	url := redisURL(t)
	for _, skew := range []time.Duration{-3 * time.Hour, 30 * 24 * time.Hour} {
		c := newClock(time.Now().Add(skew))
		l := newLimiter(t, Options{Store: url, Now: c.Now})
		ctx := context.Background()
		asset := "asset-skew-" + skew.String()
		if err := l.PutOwner(ctx, asset, AssetOwner{Team: "t", KeyFingerprint: "0a1b"}, c.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if o, ok, err := l.Owner(ctx, asset); err != nil || !ok || o.Team != "t" {
			t.Fatalf("skew %v: owner = %+v %v %v", skew, o, ok, err)
		}
		ttl, err := l.store.(*redisStore).rdb.PTTL(ctx, ownerKey(asset)).Result()
		if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
			t.Fatalf("skew %v: Redis TTL %v (%v), want the record's hour", skew, ttl, err)
		}
		c.Advance(time.Hour)
		if _, ok, _ := l.Owner(ctx, asset); ok {
			t.Fatalf("skew %v: owner outlived its expiry on the injected clock", skew)
		}
		if err := l.PutOwner(ctx, asset, AssetOwner{Team: "t"}, c.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if n, _ := l.store.(*redisStore).rdb.Exists(ctx, ownerKey(asset)).Result(); n != 0 {
			t.Fatalf("skew %v: an owner already expired was written", skew)
		}
	}
}

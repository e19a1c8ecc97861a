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

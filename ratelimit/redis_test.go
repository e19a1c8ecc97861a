package ratelimit

import (
	"context"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/redisconn/redistest"
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

// TestRedisSettleIsIdempotent: a settlement sent twice (a retry after a lost reply) counts once.
func TestRedisSettleIsIdempotent(t *testing.T) {
	c := newClock(start)
	l := newLimiter(t, Options{Store: redisURL(t), Now: c.Now})
	lim := config.Limits{TokensPerDay: 1000, TokensPerMinute: 1000}
	tk, _ := mustAdmit(t, l, Request{Key: keyScope("a", lim), Tokens: 300})
	rs := l.store.(*redisStore)
	for range 2 {
		if err := rs.sendSettle(context.Background(), c.Now(), tk, Usage{InputTokens: 40, OutputTokens: 10}); err != nil {
			t.Fatal(err)
		}
	}
	u := usageOf(t, l, keyScope("a", lim))
	if u.DayInputTokens != 40 || u.DayOutputTokens != 10 || u.Remaining["tokens_per_day"] != 950 {
		t.Fatalf("usage after a repeated settlement: %+v", u)
	}
}

// TestRedisSettleRetriedAfterRestart: a settlement that failed while Redis was down is applied
// once Redis is back, without anyone calling Settle again.
func TestRedisSettleRetriedAfterRestart(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	c := newClock(start)
	l := newLimiter(t, Options{Store: "redis://" + srv.Addr + "/0", Now: c.Now, StoreTimeout: 200 * time.Millisecond})
	lim := config.Limits{TokensPerDay: 1000}
	tk, _ := mustAdmit(t, l, Request{Key: keyScope("a", lim), Tokens: 300})
	srv.Kill()
	tk.Settle(Usage{InputTokens: 40, OutputTokens: 10}) // fails: queued
	srv.Restart()
	u := waitSettled(t, l, []Scope{keyScope("a", lim)}, 10*time.Second, "the settlement was never retried",
		func(u []ScopeUsage) bool { return u[0].DayInputTokens == 40 })
	if u[0].DayOutputTokens != 10 || u[0].Remaining["tokens_per_day"] != 950 {
		t.Fatalf("usage after the retry: %+v", u[0])
	}
}

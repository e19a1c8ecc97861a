package ratelimit

import (
	"context"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/redisconn/redistest"
)

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
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := l.Usage(context.Background(), []Scope{keyScope("a", lim)})
		if err == nil && u[0].DayInputTokens == 40 {
			if u[0].DayOutputTokens != 10 || u[0].Remaining["tokens_per_day"] != 950 {
				t.Fatalf("usage after the retry: %+v", u[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the settlement was never retried: %+v %v", u, err)
		}
		time.Sleep(20 * time.Millisecond) // waiting for the retry goroutine, not a limit window
	}
}

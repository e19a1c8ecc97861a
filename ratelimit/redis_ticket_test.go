package ratelimit

import (
	"errors"
	"testing"
	"time"

	"modelgate/config"
)

var errLostReply = errors.New("i/o timeout (test: the reply was lost)")

// faults scripts what happens to the store's next calls of one kind: "lose" runs the call and
// loses its reply, "fail" fails it without running it; an empty script lets calls through.
type faults struct{ admit, settle []string }

func (f *faults) intercept(op string, run func() error) error {
	q := &f.admit
	if op == "settle" {
		q = &f.settle
	}
	if len(*q) == 0 {
		return run()
	}
	next := (*q)[0]
	*q = (*q)[1:]
	if next == "fail" {
		return errLostReply
	}
	if err := run(); err != nil {
		return err
	}
	return errLostReply
}

// Every case admits one request reserving 100 tokens (10 of them input) under a team with
// a concurrency limit of 1, settles 5 in and 5 out, and must leave Redis exactly as if
// nothing had failed: one request, 5/5 tokens, 10 charged, the slot free.
func TestRedisTicketsSurviveLostReplies(t *testing.T) {
	url := redisURL(t)
	tests := []struct {
		name   string
		faults faults
		retry  int // background retry rounds to run after the settle
	}{
		{name: "admit_reply_lost_once", faults: faults{admit: []string{"lose"}}},
		{name: "admit_reply_lost_twice", faults: faults{admit: []string{"lose", "lose"}}},
		{name: "admit_failed_twice", faults: faults{admit: []string{"fail", "fail"}}},
		{name: "settle_failed", faults: faults{settle: []string{"fail"}}, retry: 1},
		{name: "settle_reply_lost", faults: faults{settle: []string{"lose"}}, retry: 1},
		{name: "settle_failed_three_times", faults: faults{settle: []string{"fail", "fail", "fail"}}, retry: 3},
		{name: "everything_lost", faults: faults{admit: []string{"lose", "lose"}, settle: []string{"lose", "fail"}}, retry: 2},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock(start)
			l := newLimiter(t, Options{Store: url, Now: c.Now})
			rs := l.store.(*redisStore)
			f := tc.faults
			rs.intercept = f.intercept
			name := string(rune('a' + i))
			req := Request{Key: keyScope("lost"+name, config.Limits{}), Team: teamScope("lost"+name, config.Limits{ConcurrentRequests: 1}),
				Tokens: 100, Input: 10}
			tk, d, _ := l.Admit(t.Context(), req)
			if !d.Allowed || tk == nil {
				t.Fatalf("not admitted: %+v", d)
			}
			tk.Settle(Usage{InputTokens: 5, OutputTokens: 5})
			for range tc.retry {
				rs.retryPending()
			}
			if n := rs.retryPending(); n != 0 {
				t.Fatalf("%d settles still waiting", n)
			}
			rs.intercept = nil
			u := usageOf(t, l, *req.Team)
			if u.DayRequests != 1 || u.DayInputTokens != 5 || u.DayOutputTokens != 5 {
				t.Errorf("day: requests=%d in=%d out=%d, want 1, 5, 5", u.DayRequests, u.DayInputTokens, u.DayOutputTokens)
			}
			v, err := rs.views(t.Context(), c.Now(), []Scope{*req.Team})
			if err != nil {
				t.Fatal(err)
			}
			if v[0].dayCharged != 10 || v[0].inflight != 0 {
				t.Errorf("charged today %d (want 10), slots in use %d (want 0)", v[0].dayCharged, v[0].inflight)
			}
		})
	}
}

// A settle that keeps failing is retried until its window has passed, then dropped.
func TestRedisFailedSettleDroppedAfterItsWindow(t *testing.T) {
	c := newClock(start)
	l := newLimiter(t, Options{Store: redisURL(t), Now: c.Now})
	rs := l.store.(*redisStore)
	rs.intercept = func(op string, run func() error) error {
		if op == "settle" {
			return errLostReply
		}
		return run()
	}
	tk, _ := mustAdmit(t, l, Request{Key: keyScope("w", config.Limits{}), Tokens: 10})
	tk.Settle(Usage{InputTokens: 1})
	if n := rs.retryPending(); n != 1 {
		t.Fatalf("%d waiting, want 1", n)
	}
	c.Advance(settleRetryWindow + time.Second)
	if n := rs.retryPending(); n != 0 {
		t.Fatalf("%d waiting after the window, want 0", n)
	}
}

// With on_store_error: deny, an admission whose reply was lost is refused, and undone if it
// did land: no reservation or slot is left behind, and a refused request that never reached
// Redis is not recorded.
func TestRedisLostAdmitRefusedIsUndone(t *testing.T) {
	url := redisURL(t)
	for i, script := range [][]string{{"lose", "lose"}, {"fail", "fail"}} {
		t.Run(script[0], func(t *testing.T) {
			l := newLimiter(t, Options{Store: url, Now: newClock(start).Now, OnStoreError: "deny"})
			rs := l.store.(*redisStore)
			f := faults{admit: script}
			rs.intercept = f.intercept
			team := teamScope("deny"+string(rune('a'+i)), config.Limits{ConcurrentRequests: 1})
			req := Request{Key: keyScope("deny"+string(rune('a'+i)), config.Limits{}), Team: team, Tokens: 100, Input: 10}
			if tk, d, _ := l.Admit(t.Context(), req); d.Allowed || tk != nil || d.Reason != ReasonStoreUnavailable {
				t.Fatalf("admitted: %+v", d)
			}
			if n := rs.retryPending(); n != 0 {
				t.Fatalf("%d settles waiting", n)
			}
			u := usageOf(t, l, *team)
			v, err := rs.views(t.Context(), newClock(start).Now(), []Scope{*team})
			if err != nil {
				t.Fatal(err)
			}
			if u.DayInputTokens != 0 || u.DayOutputTokens != 0 || v[0].dayCharged != 0 || v[0].inflight != 0 {
				t.Errorf("left behind: in=%d out=%d charged=%d slots=%d", u.DayInputTokens, u.DayOutputTokens, v[0].dayCharged, v[0].inflight)
			}
			if script[0] == "fail" && u.DayRequests != 0 {
				t.Errorf("a request that never reached Redis was recorded: %d", u.DayRequests)
			}
		})
	}
}

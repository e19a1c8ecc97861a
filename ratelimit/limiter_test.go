package ratelimit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/testclock"
)

// TestRequestsBurstThenRefill: N quick requests pass, the next is refused with the wait for one
// token, and the bucket refills at N per minute.
func TestRequestsBurstThenRefill(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			c := newClock(start)
			l := k.make(t, c)
			req := Request{Key: keyScope("a", config.Limits{RequestsPerMinute: 3})}
			for i := 0; i < 3; i++ {
				if _, d := mustAdmit(t, l, req); !d.Allowed {
					t.Fatalf("request %d refused: %+v", i, d)
				}
			}
			_, d := mustAdmit(t, l, req)
			if d.Allowed || d.Reason != ReasonRequests || d.Scope != "key:t/a" || d.RetryAfter != 20*time.Second {
				t.Fatalf("4th: %+v", d)
			}
			if got := headerMap(d.Headers)["x-ratelimit-remaining-requests"]; got != "0" {
				t.Errorf("remaining on refusal = %q", got)
			}
			c.Advance(19 * time.Second)
			if _, d := mustAdmit(t, l, req); d.Allowed || d.RetryAfter != time.Second {
				t.Fatalf("after 19s: %+v", d)
			}
			c.Advance(time.Second)
			if _, d := mustAdmit(t, l, req); !d.Allowed {
				t.Fatalf("after 20s: %+v", d)
			}
		})
	}
}

// TestConcurrentAdmitExact: 200 simultaneous requests against a budget of 50 admit exactly 50,
// for one key and for a team shared by several keys.
func TestConcurrentAdmitExact(t *testing.T) {
	cases := []struct {
		name string
		req  func(i int) Request
	}{
		{"one_key", func(int) Request {
			return Request{Key: keyScope("k", config.Limits{RequestsPerMinute: 50})}
		}},
		{"team_of_eight_keys", func(i int) Request {
			return Request{Key: keyScope(string(rune('a'+i%8)), config.Limits{RequestsPerMinute: 1000}),
				Team: teamScope("shared", config.Limits{RequestsPerMinute: 50})}
		}},
	}
	for _, k := range allKinds() {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				l := k.make(t, newClock(start))
				if got := admitConcurrently(t, 200, func(i int) (*Limiter, Request) { return l, tc.req(i) }); got != 50 {
					t.Fatalf("admitted %d, want 50", got)
				}
			})
		}
	}
}

func admitConcurrently(t *testing.T, n int, pick func(i int) (*Limiter, Request)) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, req := pick(i)
			<-gate
			tk, d, err := l.Admit(context.Background(), req)
			if err != nil {
				t.Errorf("Admit: %v", err)
				return
			}
			if d.Allowed {
				admitted.Add(1)
				tk.Settle(Usage{})
			}
		}()
	}
	close(gate)
	wg.Wait()
	return admitted.Load()
}

// TestTwoReplicasShareRedis: two Limiters on one Redis enforce one team budget together.
func TestTwoReplicasShareRedis(t *testing.T) {
	url := redisURL(t)
	c := newClock(start)
	a := newLimiter(t, Options{Store: url, Now: c.Now})
	b := newLimiter(t, Options{Store: url, Now: c.Now})
	team := teamScope("shared", config.Limits{RequestsPerMinute: 30, ConcurrentRequests: 100})
	got := admitConcurrently(t, 100, func(i int) (*Limiter, Request) {
		l := a
		if i%2 == 1 {
			l = b
		}
		return l, Request{Key: keyScope(string(rune('a'+i%5)), config.Limits{}), Team: team}
	})
	if got != 30 {
		t.Fatalf("admitted %d across replicas, want 30", got)
	}
	// Each replica sees the shared state.
	for name, l := range map[string]*Limiter{"a": a, "b": b} {
		if rem := usageOf(t, l, *team).Remaining["requests_per_minute"]; rem != 0 {
			t.Errorf("replica %s: remaining = %d", name, rem)
		}
	}
}

// TestTokenReservationArithmetic: reserve at admission, settle with real usage, refund the
// difference, and charge a cut stream for what it streamed.
func TestTokenReservationArithmetic(t *testing.T) {
	lim := config.Limits{TokensPerMinute: 1000, TokensPerDay: 5000}
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			l := k.make(t, newClock(start))
			key := keyScope("tok", lim)
			tk1, d := mustAdmit(t, l, Request{Key: key, Tokens: 600})
			if !d.Allowed || d.Headers.RemainingTokens != 400 || d.Headers.LimitTokens != 1000 {
				t.Fatalf("first: %+v", d)
			}
			if _, d := mustAdmit(t, l, Request{Key: key, Tokens: 600}); d.Allowed || d.Reason != ReasonTokens || d.RetryAfter != 12*time.Second {
				t.Fatalf("second should wait 12s for 200 tokens: %+v", d)
			}
			tk1.Settle(Usage{InputTokens: 100, OutputTokens: 50})
			tk1.Settle(Usage{InputTokens: 100000}) // second settle is ignored
			u := usageOf(t, l, key)
			if u.Remaining["tokens_per_minute"] != 850 || u.Remaining["tokens_per_day"] != 4850 ||
				u.DayInputTokens != 100 || u.DayOutputTokens != 50 || u.MinuteInputTokens != 100 || u.DayRequests != 1 {
				t.Fatalf("after settle: %+v", u)
			}
			tk2, d := mustAdmit(t, l, Request{Key: key, Tokens: 600})
			if !d.Allowed {
				t.Fatalf("after refund: %+v", d)
			}
			tk2.Release() // nothing sent: everything refunded, the request still counted
			u = usageOf(t, l, key)
			if u.Remaining["tokens_per_minute"] != 850 || u.Remaining["tokens_per_day"] != 4850 || u.DayRequests != 2 {
				t.Fatalf("after release: %+v", u)
			}
			// Usage above the reservation is charged in full: the bucket goes into debt.
			tk3, _ := mustAdmit(t, l, Request{Key: key, Tokens: 100})
			tk3.Settle(Usage{InputTokens: 900, OutputTokens: 150})
			u = usageOf(t, l, key)
			if u.Remaining["tokens_per_minute"] != 0 || u.Remaining["tokens_per_day"] != 3800 {
				t.Fatalf("after overrun: %+v", u)
			}
			if _, d := mustAdmit(t, l, Request{Key: key, Tokens: 1}); d.Allowed || d.RetryAfter != 13*time.Second {
				t.Fatalf("in debt of 200, one token needs 12.06s -> 13s: %+v", d)
			}
		})
	}
}

// TestOversizedReservation: a reservation above the whole minute budget passes when the
// budget is untouched, instead of never.
func TestOversizedReservation(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			c := newClock(start)
			l := k.make(t, c)
			key := keyScope("big", config.Limits{TokensPerMinute: 1000})
			tk, d := mustAdmit(t, l, Request{Key: key, Tokens: 4096})
			if !d.Allowed {
				t.Fatalf("full bucket refused oversize: %+v", d)
			}
			tk.Settle(Usage{InputTokens: 10, OutputTokens: 10})
			if _, d := mustAdmit(t, l, Request{Key: key, Tokens: 4096}); d.Allowed || d.RetryAfter != 2*time.Second {
				t.Fatalf("needs the 20 used tokens back (1.2s): %+v", d)
			}
			c.Advance(1200 * time.Millisecond)
			if _, d := mustAdmit(t, l, Request{Key: key, Tokens: 4096}); !d.Allowed {
				t.Fatalf("refilled: %+v", d)
			}
		})
	}
}

// TestConcurrencySlots: slots are freed by Settle and Release, also from a deferred Settle in a
// panicking handler, and a double Settle frees only one.
func TestConcurrencySlots(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			l := k.make(t, newClock(start))
			req := Request{Key: keyScope("c", config.Limits{ConcurrentRequests: 2}), Team: teamScope("c", config.Limits{ConcurrentRequests: 5})}
			t1, _ := mustAdmit(t, l, req)
			t2, _ := mustAdmit(t, l, req)
			if _, d := mustAdmit(t, l, req); d.Allowed || d.Reason != ReasonConcurrency || d.RetryAfter != time.Second {
				t.Fatalf("third: %+v", d)
			}
			t1.Settle(Usage{})
			t1.Settle(Usage{})
			t1.Release()
			t3, d := mustAdmit(t, l, req)
			if !d.Allowed {
				t.Fatalf("after settle: %+v", d)
			}
			if _, d := mustAdmit(t, l, req); d.Allowed {
				t.Fatal("double settle freed a second slot")
			}
			func() {
				defer func() { _ = recover() }()
				defer t2.Settle(Usage{})
				panic("handler blew up")
			}()
			t3.Release()
			if u := usageOf(t, l, *req.Team); u.Remaining["concurrent_requests"] != 5 {
				t.Fatalf("team slots after all settled: %+v", u)
			}
			var nilTicket *Ticket
			nilTicket.Settle(Usage{}) // must not panic
		})
	}
}

// TestShadowMode: a shadow request that would be refused is admitted, says why, and charges
// nothing; its traffic still counts in usage.
func TestShadowMode(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			l := k.make(t, newClock(start))
			team := teamScope("sh", config.Limits{RequestsPerMinute: 1, TokensPerMinute: 100})
			req := Request{Key: keyScope("s", config.Limits{}), Team: team, Shadow: true, Tokens: 80}
			tk1, d := mustAdmit(t, l, req)
			if !d.Allowed || d.WouldRefuse != "" {
				t.Fatalf("first: %+v", d)
			}
			tk2, d := mustAdmit(t, l, req)
			if !d.Allowed || d.WouldRefuse != ReasonRequests || d.Reason != "" || tk2 == nil {
				t.Fatalf("second: %+v", d)
			}
			tk2.Settle(Usage{InputTokens: 30, OutputTokens: 30})
			tk1.Settle(Usage{InputTokens: 10, OutputTokens: 10})
			u := usageOf(t, l, *team)
			if u.Remaining["requests_per_minute"] != 0 || u.Remaining["tokens_per_minute"] != 80 || u.DayRequests != 2 || u.DayInputTokens != 40 {
				t.Fatalf("usage: %+v", u)
			}
		})
	}
}

// TestKeyTeamAllOrNothing: when one scope refuses, the other is not charged.
func TestKeyTeamAllOrNothing(t *testing.T) {
	cases := []struct {
		name              string
		key, team         config.Limits
		tokens            int64
		wantScope         string
		wantReason        Reason
		checkKey, checkTm string // Remaining entry that must be untouched
		keyFull, teamFull int64
	}{
		{"key_refuses_requests", config.Limits{RequestsPerMinute: 1}, config.Limits{RequestsPerMinute: 10, TokensPerMinute: 1000}, 100,
			"key:t/x", ReasonRequests, "", "tokens_per_minute", 0, 900},
		{"team_refuses_tokens", config.Limits{TokensPerMinute: 1000, TokensPerDay: 10000}, config.Limits{TokensPerMinute: 150}, 100,
			"team:x", ReasonTokens, "tokens_per_day", "", 9900, 0},
		{"team_refuses_daily", config.Limits{RequestsPerMinute: 10}, config.Limits{TokensPerDay: 150}, 100,
			"team:x", ReasonDailyTokens, "requests_per_minute", "", 9, 0},
	}
	for _, k := range allKinds() {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				l := k.make(t, newClock(start))
				key, team := keyScope("x", tc.key), teamScope("x", tc.team)
				req := Request{Key: key, Team: team, Tokens: tc.tokens}
				if _, d := mustAdmit(t, l, req); !d.Allowed {
					t.Fatalf("first: %+v", d)
				}
				_, d := mustAdmit(t, l, req)
				if d.Allowed || d.Scope != tc.wantScope || d.Reason != tc.wantReason {
					t.Fatalf("second: %+v", d)
				}
				if tc.checkKey != "" {
					if got := usageOf(t, l, key).Remaining[tc.checkKey]; got != tc.keyFull {
						t.Errorf("key %s = %d, want %d", tc.checkKey, got, tc.keyFull)
					}
				}
				if tc.checkTm != "" {
					if got := usageOf(t, l, *team).Remaining[tc.checkTm]; got != tc.teamFull {
						t.Errorf("team %s = %d, want %d", tc.checkTm, got, tc.teamFull)
					}
				}
			})
		}
	}
}

// TestDailyBudgetAndRollover: a spent day refuses with daily_tokens until 00:00 UTC.
func TestDailyBudgetAndRollover(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			c := newClock(testclock.NextMidnight(start).Add(-30 * time.Minute)) // 23:30 UTC
			l := k.make(t, c)
			key := keyScope("d", config.Limits{TokensPerDay: 1000})
			tk, _ := mustAdmit(t, l, Request{Key: key, Tokens: 500})
			tk.Settle(Usage{InputTokens: 800, OutputTokens: 150})
			_, d := mustAdmit(t, l, Request{Key: key, Tokens: 100})
			if d.Allowed || d.Reason != ReasonDailyTokens || d.RetryAfter != 30*time.Minute {
				t.Fatalf("spent day: %+v", d)
			}
			h := headerMap(d.Headers)
			if h["x-ratelimit-limit-tokens"] != "1000" || h["x-ratelimit-remaining-tokens"] != "50" || h["x-ratelimit-reset-tokens"] != "30m0s" {
				t.Errorf("daily headers: %v", h)
			}
			c.Advance(30 * time.Minute)
			if _, d := mustAdmit(t, l, Request{Key: key, Tokens: 100}); !d.Allowed {
				t.Fatalf("new day: %+v", d)
			}
			if u := usageOf(t, l, key); u.DayInputTokens != 0 || u.DayRequests != 1 {
				t.Fatalf("new day usage: %+v", u)
			}
		})
	}
}

// TestStoreUnreachable: on_store_error decides, and the decision says the store failed.
func TestStoreUnreachable(t *testing.T) {
	cases := []struct {
		mode        string
		wantAllowed bool
		wantReason  Reason
	}{
		{"allow", true, ""},
		{"deny", false, ReasonStoreUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			var logs bytes.Buffer
			l := newLimiter(t, Options{Store: "redis://127.0.0.1:1/0", OnStoreError: tc.mode, StoreTimeout: 200 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			tk, d, err := l.Admit(context.Background(), Request{Key: keyScope("u", config.Limits{RequestsPerMinute: 1})})
			if err == nil || !d.StoreError || d.Allowed != tc.wantAllowed || d.Reason != tc.wantReason || (tk != nil) != tc.wantAllowed {
				t.Fatalf("got ticket=%v decision=%+v err=%v", tk, d, err)
			}
			if !strings.Contains(logs.String(), "rate limit store unavailable") {
				t.Errorf("not logged: %q", logs.String())
			}
			tk.Settle(Usage{InputTokens: 1})
			if tc.wantAllowed {
				return
			}
			if d.RetryAfterSeconds() < 1 {
				t.Errorf("retry after %d", d.RetryAfterSeconds())
			}
		})
	}
}

// TestUsageMinuteWindow: the minute counters follow the calendar minute.
func TestUsageMinuteWindow(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			c := newClock(testclock.SameDay(start, 2*time.Minute)) // the day's totals carry over
			l := k.make(t, c)
			key := keyScope("m", config.Limits{RequestsPerMinute: 100})
			for i := 0; i < 3; i++ {
				tk, _ := mustAdmit(t, l, Request{Key: key, Tokens: 10})
				tk.Settle(Usage{InputTokens: 5, OutputTokens: 2})
			}
			u := usageOf(t, l, key)
			if u.MinuteRequests != 3 || u.MinuteInputTokens != 15 || u.MinuteOutputTokens != 6 || u.Remaining["requests_per_minute"] != 97 {
				t.Fatalf("this minute: %+v", u)
			}
			c.Advance(time.Minute)
			u = usageOf(t, l, key)
			if u.MinuteRequests != 0 || u.DayRequests != 3 || u.DayOutputTokens != 6 || u.Remaining["requests_per_minute"] != 100 {
				t.Fatalf("next minute: %+v", u)
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		o    Options
	}{
		{"store_scheme", Options{Store: "mysql://x"}},
		{"on_store_error", Options{OnStoreError: "maybe"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if l, err := New(tc.o); err == nil {
				l.Close()
				t.Fatal("accepted")
			}
		})
	}
}

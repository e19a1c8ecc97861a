package ratelimit

import (
	"context"
	"testing"

	"modelgate/config"
)

// Check refuses what Admit would refuse whatever the request reserves, takes nothing, and
// allows what Admit may still admit.
func TestCheckRefusesWithoutCharging(t *testing.T) {
	cases := []struct {
		name   string
		key    config.Limits
		fill   func(t *testing.T, l *Limiter, req Request) // brings the key to its limit
		tokens int64
		want   Reason
	}{
		{name: "fresh key", key: config.Limits{RequestsPerMinute: 2}, fill: func(*testing.T, *Limiter, Request) {}, tokens: 1},
		{name: "requests spent", key: config.Limits{RequestsPerMinute: 2}, tokens: 1, want: ReasonRequests,
			fill: func(t *testing.T, l *Limiter, req Request) {
				for range 2 {
					tk, _ := mustAdmit(t, l, req)
					tk.Release()
				}
			}},
		{name: "concurrency full", key: config.Limits{ConcurrentRequests: 1}, tokens: 1, want: ReasonConcurrency,
			fill: func(t *testing.T, l *Limiter, req Request) { mustAdmit(t, l, req) }},
		{name: "day spent", key: config.Limits{TokensPerDay: 10}, tokens: 1, want: ReasonDailyTokens,
			fill: func(t *testing.T, l *Limiter, req Request) {
				tk, _ := mustAdmit(t, l, Request{Key: req.Key, Tokens: 10})
				tk.Settle(Usage{InputTokens: 10})
			}},
		{name: "day spent, no tokens asked", key: config.Limits{TokensPerDay: 10}, tokens: 0,
			fill: func(t *testing.T, l *Limiter, req Request) {
				tk, _ := mustAdmit(t, l, Request{Key: req.Key, Tokens: 10})
				tk.Settle(Usage{InputTokens: 10})
			}},
		{name: "minute tokens in debt", key: config.Limits{TokensPerMinute: 10}, tokens: 1, want: ReasonTokens,
			fill: func(t *testing.T, l *Limiter, req Request) {
				tk, _ := mustAdmit(t, l, Request{Key: req.Key, Tokens: 10})
				tk.Settle(Usage{InputTokens: 30})
			}},
	}
	for _, k := range allKinds() {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				l := k.make(t, newClock(start))
				req := Request{Key: keyScope("a", tc.key), Tokens: tc.tokens}
				tc.fill(t, l, req)
				for range 3 { // checking repeatedly takes nothing
					d, err := l.Check(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					if d.Reason != tc.want || d.Allowed != (tc.want == ReasonNone) {
						t.Fatalf("Check = %+v, want reason %q", d, tc.want)
					}
					if !d.Allowed && d.RetryAfter <= 0 {
						t.Fatalf("refusal without Retry-After: %+v", d)
					}
				}
				_, d := mustAdmit(t, l, req)
				if d.Allowed != (tc.want == ReasonNone) {
					t.Fatalf("Admit after Check = %+v, want allowed %v", d, tc.want == ReasonNone)
				}
			})
		}
	}
}

// A shadow key is never refused by Check: Admit records what would have been refused.
func TestCheckShadowAllows(t *testing.T) {
	l := newLimiter(t, Options{Store: "memory"})
	req := Request{Key: keyScope("s", config.Limits{RequestsPerMinute: 1}), Shadow: true, Tokens: 1}
	for range 3 {
		tk, _ := mustAdmit(t, l, req)
		tk.Release()
	}
	if d, err := l.Check(context.Background(), req); err != nil || !d.Allowed {
		t.Fatalf("shadow Check = %+v, %v", d, err)
	}
}

// Peek reports what the next answer's headers would say and takes nothing from any budget.
func TestPeekTakesNothing(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			l := k.make(t, newClock(start))
			req := Request{
				Key:    keyScope("a", config.Limits{RequestsPerMinute: 5}),
				Team:   teamScope("t", config.Limits{RequestsPerMinute: 10, TokensPerDay: 1000}),
				Tokens: 100,
			}
			for range 2 {
				tk, d := mustAdmit(t, l, req)
				if !d.Allowed {
					t.Fatalf("refused: %+v", d)
				}
				tk.Settle(Usage{InputTokens: 10, OutputTokens: 20})
			}
			for range 3 { // peeking repeatedly must not spend anything
				h, err := l.Peek(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				got := headerMap(h)
				want := map[string]string{
					"x-ratelimit-limit-requests":     "5",
					"x-ratelimit-remaining-requests": "3",
					"x-ratelimit-limit-tokens":       "1000",
					"x-ratelimit-remaining-tokens":   "940",
				}
				for name, v := range want {
					if got[name] != v {
						t.Errorf("%s = %q, want %q (all: %v)", name, got[name], v, got)
					}
				}
			}
			for i := range 3 {
				if _, d := mustAdmit(t, l, req); !d.Allowed {
					t.Fatalf("admission %d after peeks refused: %+v", i+3, d)
				}
			}
			if _, d := mustAdmit(t, l, req); d.Allowed {
				t.Fatalf("6th admission allowed: peeks or limits miscounted")
			}
		})
	}
}

func TestPeekUnlimitedHasNoHeaders(t *testing.T) {
	l := newLimiter(t, Options{Store: "memory"})
	h, err := l.Peek(context.Background(), Request{Key: keyScope("free", config.Limits{})})
	if err != nil {
		t.Fatal(err)
	}
	if m := headerMap(h); len(m) != 0 {
		t.Errorf("unlimited scope got headers %v", m)
	}
}

package ratelimit

import (
	"context"
	"testing"

	"modelgate/config"
)

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

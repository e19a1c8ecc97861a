package billing

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestOutputWithin(t *testing.T) {
	p := pricesFor(t) // a: 1 in, 4 out; b: 0.15 in, 0.6 out (per 1M tokens)
	cases := []struct {
		name   string
		model  string
		input  int64
		amount int64
		want   int64
	}{
		{"exact fit", "a", 100, 140, 10},
		{"a micro short of the next token", "a", 100, 143, 10},
		{"input alone too dear", "a", 100, 99, -1},
		{"input exactly, no output", "a", 100, 100, 0},
		{"fractional prices round the sum up", "b", 10, 10, 14}, // 1.5 + 14*0.6 = 9.9 -> 10
		{"nothing left", "b", 1, 0, -1},
		{"unpriced", "free", 1e6, 0, math.MaxInt64},
		{"unknown model", "nope", 1e6, 0, math.MaxInt64},
		{"huge amount", "a", 0, 1 << 50, 1 << 48},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := p.OutputWithin(tc.model, tc.input, tc.amount)
			if got != tc.want {
				t.Fatalf("OutputWithin(%s, %d, %d) = %d, want %d", tc.model, tc.input, tc.amount, got, tc.want)
			}
			if got >= 0 && got < math.MaxInt64 {
				if c := p.Estimate(tc.model, tc.input, got); c > tc.amount {
					t.Errorf("%d output tokens cost %d, more than %d", got, c, tc.amount)
				}
				if c := p.Estimate(tc.model, tc.input, got+1); c <= tc.amount {
					t.Errorf("one token more still fits: %d <= %d", c, tc.amount)
				}
			}
		})
	}
}

func FuzzOutputWithin(f *testing.F) {
	f.Add(int64(100), int64(140))
	f.Add(int64(0), int64(1))
	f.Add(int64(1e9), int64(1e12))
	p := pricesFor(f)
	f.Fuzz(func(t *testing.T, input, amount int64) {
		if input < 0 || amount < 0 || input > 1e12 || amount > 1e15 {
			return
		}
		for _, model := range []string{"a", "b"} {
			got := p.OutputWithin(model, input, amount)
			switch {
			case got < 0:
				if p.Estimate(model, input, 0) <= amount {
					t.Fatalf("%s: -1 though the input alone fits", model)
				}
			case p.Estimate(model, input, got) > amount:
				t.Fatalf("%s: %d tokens cost more than %d", model, got, amount)
			case p.Estimate(model, input, got+1) <= amount:
				t.Fatalf("%s: %d is not the most that fits %d", model, got, amount)
			}
		}
	})
}

func TestLedgerLeft(t *testing.T) {
	key := Budget{Scope: "key:t/k", PerDay: 1000, PerMonth: 5000}
	team := Budget{Scope: "team:t", PerDay: 800}
	cases := []struct {
		name     string
		budgets  []Budget
		spent    int64 // charged to key and team alike
		reserved int64 // held against budgets by a call still running
		want     int64
	}{
		{"untouched key", []Budget{key}, 0, 0, 1000},
		{"team tighter", []Budget{key, team}, 0, 0, 800},
		{"spend and holds counted", []Budget{key, team}, 300, 200, 300},
		{"over spent", []Budget{key}, 1200, 0, 0},
		{"unlimited", []Budget{{Scope: "key:t/k"}}, 50, 0, -1},
		{"month tighter", []Budget{{Scope: "key:t/k", PerDay: 1000, PerMonth: 600}}, 0, 0, 600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
			l, err := NewLedger(context.Background(), nil, c.now, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.spent > 0 {
				l.Charge([]string{key.Scope, team.Scope}, tc.spent)
			}
			if tc.reserved > 0 {
				h, r := l.Reserve(tc.budgets, tc.reserved)
				if r != nil {
					t.Fatalf("hold refused: %+v", r)
				}
				defer h.Cancel()
			}
			if got := l.Left(tc.budgets); got != tc.want {
				t.Fatalf("Left = %d, want %d", got, tc.want)
			}
			if tc.want > 0 {
				// What Left names fits, and one micro-unit more does not.
				h, r := l.Reserve(tc.budgets, tc.want)
				if r != nil {
					t.Fatalf("reserving what is left was refused: %+v", r)
				}
				h.Cancel()
				if _, r := l.Reserve(tc.budgets, tc.want+1); r == nil {
					t.Fatal("one micro-unit more than what is left was admitted")
				}
			}
		})
	}
}

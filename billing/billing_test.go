package billing

import (
	"context"
	"errors"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/store"
)

func pricesFor(t testing.TB) Prices {
	t.Helper()
	half := 0.5
	return NewPrices(&config.Config{Models: []config.Model{
		{ID: "a", Price: &config.Price{Input: 1, CachedInput: &half, Output: 4}},
		{ID: "b", Price: &config.Price{Input: 0.15, Output: 0.6}},
		{ID: "free"},
	}})
}

func TestCost(t *testing.T) {
	p := pricesFor(t)
	for _, c := range []struct {
		model string
		u     Usage
		want  int64
	}{
		{"a", Usage{InputTokens: 1000, OutputTokens: 100}, 1000 + 400},
		{"a", Usage{InputTokens: 1000, CachedInputTokens: 600, OutputTokens: 100}, 400 + 300 + 400},
		{"a", Usage{InputTokens: 10, CachedInputTokens: 99}, 5}, // cached cannot exceed input
		{"b", Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000}, 150_000},
		{"b", Usage{InputTokens: 1}, 1}, // 0.15 micro-units round up: no paid call is free
		{"b", Usage{}, 0},
		{"free", Usage{InputTokens: 1e9, OutputTokens: 1e9}, 0},
		{"unknown", Usage{InputTokens: 5}, 0},
		{"a", Usage{InputTokens: -5, OutputTokens: -1}, 0},
	} {
		if got := p.Cost(c.model, c.u); got != c.want {
			t.Errorf("Cost(%s, %+v) = %d, want %d", c.model, c.u, got, c.want)
		}
	}
	if p.Estimate("a", 100, 10) != 140 || !p.Priced("b") || p.Priced("free") {
		t.Error("Estimate/Priced")
	}
	if MicrosOf(25.5) != 25_500_000 || Amount(1_500_000) != 1.5 {
		t.Error("conversions")
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func openBolt(t *testing.T, c *clock) store.Store {
	t.Helper()
	st, err := store.OpenBolt(t.TempDir(), store.BoltOptions{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestLedgerBudgets(t *testing.T) {
	c := &clock{time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	st := openBolt(t, c)
	l, err := NewLedger(ctx, st, c.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	budgets := []Budget{{Scope: "key:t/k", PerDay: 100}, {Scope: "team:t", PerMonth: 250}}
	h1, r := l.Reserve(budgets, 40)
	h2, r2 := l.Reserve(budgets, 40)
	if r != nil || r2 != nil {
		t.Fatal("two 40s fit in 100")
	}
	if _, r := l.Reserve(budgets, 40); r == nil || r.Scope != "key:t/k" || r.Period != "day" {
		t.Fatalf("third 40 while 80 reserved: %+v", r)
	}
	h1.Settle(10) // cheaper than reserved: room again
	h2.Cancel()
	if d, m := l.Spent("key:t/k"); d != Amount(10) || m != Amount(10) {
		t.Fatalf("spent %v %v", d, m)
	}
	h3, r := l.Reserve(budgets, 500) // larger than the whole budget: needs it untouched
	if r == nil {
		t.Fatal("a 500 reservation with 10 spent of 100")
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if h3 != nil {
		t.Fatal("a refused reservation returned a hold")
	}

	// A new day: the day budget is fresh, the month goes on.
	c.t = c.t.Add(30 * time.Minute) // 2026-03-31 23:30
	h4, _ := l.Reserve(budgets, 90)
	h4.Settle(90)
	if _, r := l.Reserve(budgets, 1); r == nil || r.Period != "day" {
		t.Fatalf("10+90 of a 100 day budget spent, yet admitted: %+v", r)
	}
	c.t = time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC)
	h6, r := l.Reserve(budgets, 90)
	if r != nil {
		t.Fatalf("new day and month: %+v", r)
	}
	h6.Settle(90)
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// A second ledger on the same store (another replica, or a restart) sees what was spent.
	l2, err := NewLedger(ctx, st, c.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, m := l2.Spent("team:t"); d != Amount(90) || m != Amount(90) {
		t.Fatalf("second ledger: %v today, %v this month", d, m)
	}
	if _, r := l2.Reserve(budgets, 10); r != nil {
		t.Fatalf("second ledger refused 10 with 90 of 100: %+v", r)
	}
	if _, r := l2.Reserve([]Budget{{Scope: "key:t/k", PerDay: 100}}, 10); r == nil {
		t.Fatal("second ledger admitted 10 with 90 spent and 10 reserved of 100")
	}
}

// failingStore fails every Add and Batch, to check that spend is kept for the next flush.
type failingStore struct{ store.Store }

func (failingStore) Add(context.Context, string, string, map[string]int64, time.Duration) error {
	return errors.New("down")
}

func (failingStore) Batch(context.Context, func(store.Tx) error) error { return errors.New("down") }

func TestFlushFailureKeepsSpend(t *testing.T) {
	c := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	st := openBolt(t, c)
	l, _ := NewLedger(ctx, failingStore{st}, c.now, nil)
	health := &store.WriteHealth{}
	l.ReportWrites(health)
	h, _ := l.Reserve([]Budget{{Scope: "team:t", PerDay: 100}}, 60)
	h.Settle(60)
	if err := l.Flush(ctx); err == nil {
		t.Fatal("flush into a failing store succeeded")
	}
	if health.Degraded() == "" {
		t.Error("a failed flush left the store's health undegraded")
	}
	if _, r := l.Reserve([]Budget{{Scope: "team:t", PerDay: 100}}, 60); r == nil {
		t.Fatal("a failed flush lost the spend")
	}
	l.st = st
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := health.Degraded(); d != "" {
		t.Errorf("degraded after a flush that succeeded: %s", d)
	}
	l2, _ := NewLedger(ctx, st, c.now, nil)
	if d, _ := l2.Spent("team:t"); d != Amount(60) {
		t.Fatalf("after the retry the store holds %v", d)
	}

	r := NewRecorder(failingStore{st}, time.Hour, c.now, nil)
	r.Record("t", "k", "m", Usage{InputTokens: 5}, 7)
	if err := r.Flush(ctx); err == nil {
		t.Fatal("history flush into a failing store succeeded")
	}
	r.st = st
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rows, _ := NewRecorder(st, time.Hour, c.now, nil).Query(ctx, "20260301", "20260301", map[string]bool{"team": true})
	if len(rows) != 1 || rows[0].InputTokens != 5 || rows[0].CostMicros != 7 {
		t.Fatalf("rows after retry: %+v", rows)
	}
}

func TestHistoryQuery(t *testing.T) {
	c := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	st := openBolt(t, c)
	r := NewRecorder(st, 48*time.Hour, c.now, nil)
	r.Record("alpha", "k1", "m1", Usage{InputTokens: 10, CachedInputTokens: 4, OutputTokens: 5, ReasoningTokens: 2}, 100)
	r.Record("alpha", "k2", "m1", Usage{InputTokens: 1, OutputTokens: 1}, 1)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(24 * time.Hour)
	r.Record("alpha", "k1", "org/m2", Usage{InputTokens: 3}, 3) // not flushed: still counted
	r.Record("beta", "k1", "m1", Usage{OutputTokens: 7}, 70)

	all, err := r.Query(ctx, "20260301", "20260302", map[string]bool{"team": true, "key": true, "model": true})
	if err != nil || len(all) != 4 {
		t.Fatalf("rows %+v %v", all, err)
	}
	if all[0] != (Row{Day: "2026-03-01", Team: "alpha", Key: "k1", Model: "m1", Requests: 1, InputTokens: 10, CachedInputTokens: 4, OutputTokens: 5, ReasoningTokens: 2, CostMicros: 100}) {
		t.Fatalf("first row %+v", all[0])
	}
	if all[2].Model != "org/m2" {
		t.Fatalf("a model name with a slash: %+v", all[2])
	}
	byTeam, _ := r.Query(ctx, "20260301", "20260302", map[string]bool{"team": true})
	if len(byTeam) != 3 || byTeam[0].Requests != 2 || byTeam[0].CostMicros != 101 || byTeam[0].Key != "" || byTeam[0].Model != "" {
		t.Fatalf("by team %+v", byTeam)
	}
	hours, err := r.QueryHours(ctx, "20260301", "20260302", map[string]bool{"team": true})
	if err != nil || len(hours) != 3 || hours[0].Hour != "2026-03-01T12:00:00Z" || hours[0].Requests != 2 ||
		hours[2].Hour != "2026-03-02T12:00:00Z" || hours[2].Team != "beta" || hours[2].CostMicros != 70 {
		t.Fatalf("hourly rows %+v %v", hours, err)
	}
	perDay, _ := r.Query(ctx, "20260302", "20260302", nil)
	if len(perDay) != 1 || perDay[0].Requests != 2 || perDay[0].CostMicros != 73 {
		t.Fatalf("one day, no grouping: %+v", perDay)
	}
	if last, err := r.LastUse(ctx); err != nil || !last["alpha/k1"].Equal(c.t) || !last["alpha/k2"].Equal(c.t.Add(-24*time.Hour)) {
		t.Fatalf("last use %v %v", last, err)
	}
	// Another replica (or this one after a restart) sees the last uses once flushed.
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	other, _ := NewRecorder(st, 48*time.Hour, c.now, nil).LastUse(ctx)
	if !other["alpha/k1"].Equal(c.t) || !other["beta/k1"].Equal(c.t) || len(other) != 3 {
		t.Fatalf("last use seen by another recorder: %v", other)
	}
	// Retention: the rows of 1 March are gone two days after that day ended.
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.t = time.Date(2026, 3, 4, 0, 1, 0, 0, time.UTC)
	rows, _ := r.Query(ctx, "20260301", "20260304", map[string]bool{"team": true})
	if len(rows) != 2 || rows[0].Day != "2026-03-02" {
		t.Fatalf("after retention: %+v", rows)
	}
}

func TestChargeWithoutReservation(t *testing.T) {
	c := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l, _ := NewLedger(context.Background(), nil, c.now, nil)
	l.Charge([]string{"key:t/k", "team:t", ""}, 70)
	if d, m := l.Spent("team:t"); d != Amount(70) || m != Amount(70) {
		t.Fatalf("spent %v %v", d, m)
	}
	if _, r := l.Reserve([]Budget{{Scope: "key:t/k", PerDay: 100}}, 40); r == nil {
		t.Fatal("70 charged + 40 fit in 100")
	}
}

// A call whose upper bound exceeds what is left of a budget is refused even when nothing is
// spent yet, so the budget is never overrun; one that fits exactly is admitted.
func TestLedgerRefusesCallLargerThanBudget(t *testing.T) {
	cases := []struct {
		name     string
		budget   Budget
		spent    int64
		amount   int64
		refused  string // "": admitted; else the period
		tooLarge bool
	}{
		{"larger than an untouched day budget", Budget{Scope: "key:t/k", PerDay: 100}, 0, 101, "day", true},
		{"larger than an untouched month budget", Budget{Scope: "team:t", PerMonth: 100}, 0, 500, "month", true},
		{"exactly the whole budget", Budget{Scope: "key:t/k", PerDay: 100}, 0, 100, "", false},
		{"larger than what is left", Budget{Scope: "key:t/k", PerDay: 100}, 60, 41, "day", true},
		{"budget spent", Budget{Scope: "key:t/k", PerDay: 100}, 100, 1, "day", false},
		{"no budget", Budget{Scope: "key:t/k"}, 0, 1 << 40, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
			l, err := NewLedger(context.Background(), openBolt(t, c), c.now, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.spent > 0 {
				l.Charge([]string{tc.budget.Scope}, tc.spent)
			}
			h, r := l.Reserve([]Budget{tc.budget}, tc.amount)
			switch {
			case tc.refused == "" && r != nil:
				t.Fatalf("refused: %+v", r)
			case tc.refused != "" && (r == nil || r.Period != tc.refused || r.TooLarge != tc.tooLarge):
				t.Fatalf("got %+v, want a %s refusal (too large: %v)", r, tc.refused, tc.tooLarge)
			case tc.refused != "" && h != nil:
				t.Fatal("a refusal returned a hold")
			}
			h.Cancel()
		})
	}
}

package accounting

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"modelgate/billing"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// Bill hands the record's end user and tags to the usage history: the request shows under
// its user and each tag's value, per team and model.
func TestBillRecordsAttribution(t *testing.T) {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	prices := billing.NewPrices(&config.Config{Models: []config.Model{{ID: "m", Price: &config.Price{Input: 1, Output: 2}}}})
	history := billing.NewRecorder(nil, time.Hour, now, nil)
	s := Settler{Log: slog.New(slog.DiscardHandler), History: history}
	rec := &reqlog.Record{Team: "alpha", Key: "k", Model: "m", Admitted: true, InputTokens: 1_000_000,
		EndUser: "user-7", Tags: "feature:search,customer:acme"}
	cost := s.Bill(rec, Spend{}, prices)
	for _, tc := range []struct {
		dim  billing.Dimension
		want string
	}{{billing.Dimension{}, "user-7"}, {billing.Dimension{TagKey: "feature"}, "search"}, {billing.Dimension{TagKey: "customer"}, "acme"}} {
		rows, err := history.QueryAttribution(ctx, "20260301", "20260301", tc.dim, map[string]bool{"team": true, "model": true})
		if err != nil || len(rows) != 1 || rows[0].Value != tc.want || rows[0].Team != "alpha" || rows[0].Model != "m" ||
			rows[0].Requests != 1 || rows[0].CostMicros != cost {
			t.Errorf("%+v: %+v %v", tc.dim, rows, err)
		}
	}
}

// BenchmarkBill is a request's billing with and without an end user and two tags: the
// attribution's share of the request path (the bar: under 3% of throughput).
//
//	go test ./accounting -run '^$' -bench Bill -count 8
func BenchmarkBill(b *testing.B) {
	prices := billing.NewPrices(&config.Config{Models: []config.Model{{ID: "m", Price: &config.Price{Input: 0.15, Output: 0.6}}}})
	for _, attributed := range []bool{false, true} {
		name := "plain"
		if attributed {
			name = "tags_and_user"
		}
		b.Run(name, func(b *testing.B) {
			ledger, _ := billing.NewLedger(b.Context(), nil, nil, nil)
			s := Settler{Log: slog.New(slog.DiscardHandler), Ledger: ledger, History: billing.NewRecorder(nil, time.Hour, nil, nil)}
			rec := &reqlog.Record{Team: "team", Key: "key", Model: "m", Admitted: true, InputTokens: 1200, OutputTokens: 350}
			if attributed {
				rec.EndUser = "user-42"
				rec.Tags = "feature:search,customer:acme"
			}
			spend := Spend{KeyScope: "key:team/key", TeamScope: "team:team"}
			b.ReportAllocs()
			for b.Loop() {
				s.Bill(rec, spend, prices)
			}
		})
	}
}

// An attempt a fallback abandoned, settled from a record derived from its request's
// (issue 42): its usage-history row is under the request's end user and tags, at the price of
// the model it was sent to, and a call that holds nothing charges the end user's daily scope
// with the key's and the team's.
func TestAbandonedAttemptKeepsAttribution(t *testing.T) {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	prices := billing.NewPrices(&config.Config{Models: []config.Model{
		{ID: "asked", Price: &config.Price{Input: 1, Output: 1}}, {ID: "stalled", Price: &config.Price{Input: 3, Output: 3}}}})
	history := billing.NewRecorder(nil, time.Hour, now, nil)
	ledger, err := billing.NewLedger(ctx, nil, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := Settler{Log: slog.New(slog.DiscardHandler), Ledger: ledger, History: history}
	req := &reqlog.Record{RequestID: "req-1", Team: "alpha", Key: "k", Model: "asked", Admitted: true,
		EndUser: "user-7", Tags: "feature:search", InputEstimate: 5}
	rec := req.ForAttempt("stalled", "first_token_timeout")
	spend := Spend{KeyScope: "key:alpha/k", TeamScope: "team:alpha", EndUserScope: "enduser:alpha/user-7"}
	ch := ChargeFor(ratelimit.Usage{InputTokens: 1_000_000}, Ending{How: Unanswered})
	cost := s.SettleApart(ch, &rec, spend, prices)
	if cost != 3_000_000 {
		t.Fatalf("cost %d, want 3000000: 1M input at the stalled model's price", cost)
	}
	for _, tc := range []struct {
		dim  billing.Dimension
		want string
	}{{billing.Dimension{}, "user-7"}, {billing.Dimension{TagKey: "feature"}, "search"}} {
		rows, err := history.QueryAttribution(ctx, "20260301", "20260301", tc.dim, map[string]bool{"model": true})
		if err != nil || len(rows) != 1 || rows[0].Value != tc.want || rows[0].Model != "stalled" || rows[0].CostMicros != cost {
			t.Errorf("%+v: %+v %v", tc.dim, rows, err)
		}
	}
	for _, scope := range []string{"key:alpha/k", "team:alpha", "enduser:alpha/user-7"} {
		if day, _ := ledger.Spent(scope); day != 3 {
			t.Errorf("%s spent %v today, want 3", scope, day)
		}
	}
}

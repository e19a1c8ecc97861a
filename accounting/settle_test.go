package accounting

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/billing"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/store"
)

// Settle writes the settled usage into the record, and only an estimate is logged as
// "billed, usage unknown", with the figures an operator reconciles.
func TestSettleRecordsAndWarns(t *testing.T) {
	for _, tc := range []struct {
		name string
		ch   Charge
		warn bool
	}{
		{"known", Known(ratelimit.Usage{InputTokens: 5, OutputTokens: 7, CachedInputTokens: 2, ReasoningTokens: 3}), false},
		{"estimated", UpperBound(ratelimit.Usage{InputTokens: 10, OutputTokens: 100}, ratelimit.Usage{}, NoAnswer), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := Settler{Log: slog.New(slog.NewTextHandler(&logs, nil))}
			rec := &reqlog.Record{RequestID: "req_1", Route: "/v1/responses", Team: "alpha"}
			s.SettleAfter(nil, tc.ch, ratelimit.Usage{}, rec)
			u := tc.ch.Usage
			if rec.InputTokens != u.InputTokens || rec.OutputTokens != u.OutputTokens || rec.CachedTokens != u.CachedInputTokens ||
				rec.ReasoningTokens != u.ReasoningTokens || rec.UsageEstimated != tc.ch.Unknown {
				t.Errorf("record %+v after settling %+v", rec, tc.ch)
			}
			warned := strings.Contains(logs.String(), "billed, usage unknown")
			if warned != tc.warn || (warned && !strings.Contains(logs.String(), "output_tokens=100")) {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, logs.String())
			}
		})
	}
}

// Bill charges the settled usage at the model's price once: against the hold the admission
// took, or straight to the caller's scopes when it took none; a refused or deferred call
// costs nothing here, and a platform refusal adds no history row.
func TestBill(t *testing.T) {
	ctx := context.Background()
	// A fixed instant: the ledger's day, the history's day and the query's are one.
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	in := 1.0
	cfg := &config.Config{Models: []config.Model{{ID: "m", Price: &config.Price{Input: in, Output: 2}}}}
	prices := billing.NewPrices(cfg)
	billed := func() *reqlog.Record {
		return &reqlog.Record{Team: "alpha", Key: "k", Model: "m", Admitted: true, InputTokens: 1_000_000, OutputTokens: 500_000}
	}
	const cost = 2_000_000 // 1M input at 1 plus 0.5M output at 2, in micro-units
	tests := []struct {
		name    string
		rec     *reqlog.Record
		hold    bool
		want    int64
		spent   float64 // the key's day total afterwards, in currency units
		history int
	}{
		{"held_and_settled", billed(), true, cost, 2, 1},
		{"charged_without_hold", billed(), false, cost, 2, 1},
		{"refused_by_limiter", &reqlog.Record{Team: "alpha", Model: "m"}, true, 0, 0, 0},
		{"billed_later", func() *reqlog.Record { r := billed(); r.BilledLater = true; return r }(), true, 0, 0, 0},
		{"platform_refused", &reqlog.Record{Team: "alpha", Key: "k", Model: "m", Admitted: true, UpstreamErr: "status_4xx"}, true, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.OpenBolt(t.TempDir(), store.BoltOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			ledger, err := billing.NewLedger(ctx, st, now, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			history := billing.NewRecorder(st, time.Hour, now, slog.New(slog.DiscardHandler))
			s := Settler{Log: slog.New(slog.DiscardHandler), Ledger: ledger, History: history}
			spend := Spend{KeyScope: "key:alpha/k", TeamScope: "team:alpha"}
			if tc.hold {
				h, refused := ledger.Reserve([]billing.Budget{{Scope: spend.KeyScope}, {Scope: spend.TeamScope}}, 10_000_000)
				if refused != nil {
					t.Fatal(refused)
				}
				spend.Hold = h
			}
			if got := s.Bill(tc.rec, spend, prices); got != tc.want {
				t.Errorf("cost %d, want %d", got, tc.want)
			}
			if day, _ := ledger.Spent(spend.KeyScope); day != tc.spent {
				t.Errorf("key spent %v today, want %v (the hold settled, not kept)", day, tc.spent)
			}
			rows, err := history.Query(ctx, "20260301", "20260301", map[string]bool{"team": true, "key": true, "model": true})
			if err != nil || len(rows) != tc.history {
				t.Errorf("%d history rows (%v), want %d", len(rows), err, tc.history)
			}
		})
	}
}

// learnerLog keeps what a Settler taught.
type learnerLog struct{ seen [][2]int64 }

func (l *learnerLog) Observe(_, _ string, estimated, reported int64) {
	l.seen = append(l.seen, [2]int64{estimated, reported})
}

// Calibration learns only from the platform's own figures, and compares them with the
// estimates of the calls that reported: a fan-out choice the platform refused billed
// nothing and is left out.
func TestSettleTeachesCalibration(t *testing.T) {
	u := func(in, out int64) ratelimit.Usage { return ratelimit.Usage{InputTokens: in, OutputTokens: out} }
	for _, tc := range []struct {
		name string
		ch   Charge
		want [][2]int64
	}{
		{"one_call", Known(u(12, 3)), [][2]int64{{10, 12}}},
		{"two_choices", Known(u(12, 3)).Plus(Known(u(12, 4))), [][2]int64{{20, 24}}},
		{"one_choice_refused", Known(u(12, 3)).Plus(Charge{}), [][2]int64{{10, 12}}},
		{"estimated_teaches_nothing", Known(u(12, 3)).Plus(UpperBound(u(10, 50), u(0, 0), NoAnswer)), nil},
		{"refused_teaches_nothing", Charge{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l learnerLog
			s := Settler{Log: slog.New(slog.DiscardHandler), Calibration: &l}
			s.SettleAfter(nil, tc.ch, ratelimit.Usage{}, &reqlog.Record{Model: "m", InputEstimate: 10})
			if !slices.Equal(l.seen, tc.want) {
				t.Errorf("taught %v, want %v", l.seen, tc.want)
			}
		})
	}
}

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

// TestSettleCrashed: a call a killed replica left open is charged its reservation in the
// record, the spend ledger (its key, team and end user) and the usage history with its attribution,
// and warned about as billed with its usage unknown, reason crashed.
func TestSettleCrashed(t *testing.T) {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	prices := billing.NewPrices(&config.Config{Models: []config.Model{{ID: "m", Price: &config.Price{Input: 1, Output: 2}}}})
	history := billing.NewRecorder(nil, time.Hour, now, nil)
	ledger, err := billing.NewLedger(ctx, nil, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	s := Settler{Log: slog.New(slog.NewTextHandler(&logged, nil)), Ledger: ledger, History: history}
	rec := &reqlog.Record{RequestID: "req-1", Team: "alpha", Key: "k", Model: "m", Admitted: true, EndUser: "user-7"}
	reserve := ratelimit.Usage{InputTokens: 1_000_000, OutputTokens: 500_000}
	spend := Spend{KeyScope: "key:alpha/k", TeamScope: "team:alpha", EndUserScope: "enduser:alpha/user-7"}
	cost := s.SettleApart(ChargeFor(reserve, Ending{How: Killed}), rec, spend, prices)
	if want := int64(2_000_000); cost != want {
		t.Fatalf("cost %d, want %d (1M input at 1 + 0.5M output at 2)", cost, want)
	}
	if rec.InputTokens != reserve.InputTokens || rec.OutputTokens != reserve.OutputTokens || rec.UsageEstimated != Crashed {
		t.Errorf("record %+v", rec)
	}
	for _, scope := range []string{"key:alpha/k", "team:alpha", "enduser:alpha/user-7"} {
		if day, _ := ledger.Spent(scope); day != 2 {
			t.Errorf("%s spent %v today, want 2", scope, day)
		}
	}
	if _, month := ledger.Spent("enduser:alpha/user-7"); month != 0 {
		t.Errorf("the end user's scope spent %v this month, want none: it keeps a daily total only", month)
	}
	rows, err := history.QueryAttribution(ctx, "20260301", "20260301", billing.Dimension{}, map[string]bool{"team": true})
	if err != nil || len(rows) != 1 || rows[0].Value != "user-7" || rows[0].InputTokens != reserve.InputTokens ||
		rows[0].OutputTokens != reserve.OutputTokens || rows[0].CostMicros != cost {
		t.Errorf("history %+v %v", rows, err)
	}
	if line := logged.String(); !strings.Contains(line, "billed, usage unknown") || !strings.Contains(line, "reason=crashed") {
		t.Errorf("warning %q", line)
	}
}

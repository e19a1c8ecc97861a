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

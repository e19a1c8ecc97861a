package accounting

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"modelgate/billing"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

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

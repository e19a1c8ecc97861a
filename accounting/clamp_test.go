package accounting

import (
	"context"
	"testing"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/ratelimit"
)

// What a clamp may leave a call is the tightest budget's room, per choice, after the input:
// 1 micro-unit an input token and 2 an output token, against a key's 10,000 a day.
func TestSpendRoom(t *testing.T) {
	prices := billing.NewPrices(&config.Config{Models: []config.Model{{ID: "m", Price: &config.Price{Input: 1, Output: 2}}}})
	limited := &auth.Principal{Team: "alpha", ScopeID: "key:alpha/k", TeamScopeID: "team:alpha", KeyLimits: config.Limits{SpendPerDay: 0.01}}
	free := &auth.Principal{Team: "alpha", ScopeID: "key:alpha/f", TeamScopeID: "team:alpha"}
	endUser := &auth.Principal{Team: "alpha", ScopeID: "key:alpha/k", TeamScopeID: "team:alpha", KeyLimits: config.Limits{SpendPerDay: 0.01},
		EndUserLimits: config.EndUserLimits{SpendPerDay: 0.004}}
	for _, tc := range []struct {
		name        string
		p           *auth.Principal
		endUser     string
		spent       int64 // held against the key before the clamp is asked
		estimate, n int64
		want        int64
	}{
		{"one choice", limited, "", 0, 1000, 1, 4500},
		{"two choices share the room", limited, "", 0, 1000, 2, 2000},
		{"what is held is not room", limited, "", 4000, 1000, 1, 2500},
		{"the input alone does not fit", limited, "", 0, 20000, 1, -1},
		{"no budget is limited", free, "", 0, 1000, 1, -1},
		{"the end user's budget is tighter", endUser, "u", 0, 1000, 1, 1500},
		{"no end user named", endUser, "", 0, 1000, 1, 4500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ledger, err := billing.NewLedger(context.Background(), nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.spent > 0 {
				if _, refused := ledger.Reserve([]billing.Budget{{Scope: tc.p.ScopeID, PerDay: 10_000}}, tc.spent); refused != nil {
					t.Fatal(refused)
				}
			}
			if got := SpendRoom(ledger, prices, tc.p, tc.endUser, "m", tc.estimate, tc.n); got != tc.want {
				t.Errorf("room %d, want %d", got, tc.want)
			}
		})
	}
}

// What is left of tokens_per_day is shared by the choices after their input; the end user's
// limit counts when the request names one.
func TestDailyTokenRoom(t *testing.T) {
	l, err := ratelimit.New(ratelimit.Options{Store: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &auth.Principal{Team: "alpha", ScopeID: "key:alpha/k", TeamScopeID: "team:alpha",
		KeyLimits: config.Limits{TokensPerDay: 1000}, TeamLimits: config.Limits{TokensPerDay: 300},
		EndUserLimits: config.EndUserLimits{TokensPerDay: 120}}
	free := &auth.Principal{Team: "beta", ScopeID: "key:beta/k", TeamScopeID: "team:beta"}
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		p           *auth.Principal
		endUser     string
		estimate, n int64
		want        int64
	}{
		{"the team's is tightest", p, "", 100, 1, 200},
		{"two choices", p, "", 100, 2, 50},
		{"the end user's", p, "u", 100, 1, 20},
		{"the input alone does not fit", p, "u", 200, 1, -80},
		{"no daily limit", free, "", 100, 1, -1},
	} {
		if got := DailyTokenRoom(ctx, l, tc.p, tc.endUser, tc.estimate, tc.n); got != tc.want {
			t.Errorf("%s: room %d, want %d", tc.name, got, tc.want)
		}
	}
}

package main

import (
	"context"
	"testing"

	"modelgate/alerts"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/store"
)

// TestReadingsIncludeRuntimeTeams: a team created through the admin API has its spend
// budgets watched like a config team's.
func TestReadingsIncludeRuntimeTeams(t *testing.T) {
	st, err := store.Open(config.Ratelimit{Store: "memory", DataPath: t.TempDir()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ledger, err := billing.NewLedger(context.Background(), st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	issued := auth.NewIssued(nil)
	issued.ReplaceTeams([]auth.RuntimeTeam{{Name: "growth", Limits: config.Limits{SpendPerDay: 5}}})
	cfg := config.Default()
	f := figures{state: func() *config.Config { return cfg }, ledger: ledger, issued: issued}
	got := f.readings(context.Background())
	if len(got) != 1 || got[0] != (alerts.Reading{Scope: "team", Team: "growth", Budget: alerts.BudgetSpendDay, Limit: 5, Currency: cfg.Pricing.Currency}) {
		t.Fatalf("readings %+v", got)
	}
}

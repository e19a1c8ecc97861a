package main

import (
	"context"
	"log/slog"

	"modelgate/alerts"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/store"
)

// alerting is the alerts as main wires them: a Sender over the config's webhooks and a
// Watcher over the figures the request path already keeps (the spend ledger, the limiter's
// day counters, the issued keys). The Watcher reads them on its own loop, so detection adds
// nothing to a request.
type alerting struct {
	sender  *alerts.Sender
	watcher *alerts.Watcher
}

// figures are where the Watcher reads budgets and their use; state is the config serving now.
type figures struct {
	state   func() *config.Config
	ledger  *billing.Ledger
	limiter *ratelimit.Limiter
	issued  *auth.Issued
}

func newAlerting(cfg *config.Config, records store.Store, f figures, logger *slog.Logger) (*alerting, error) {
	sender := alerts.NewSender(alerts.SenderOptions{Webhooks: cfg.Alerts.Webhooks, Log: logger})
	w, err := alerts.NewWatcher(alerts.Options{Store: records, Sender: sender, Log: logger,
		Readings: f.readings, IssuedKeys: f.issuedKeys})
	if err != nil {
		return nil, err
	}
	return &alerting{sender: sender, watcher: w}, nil
}

// issuedKeys lists the issued keys for the expiry watch.
func (f figures) issuedKeys() []alerts.IssuedKey {
	keys := f.issued.Keys()
	out := make([]alerts.IssuedKey, len(keys))
	for i, k := range keys {
		out[i] = alerts.IssuedKey{ID: k.ID, Team: k.Team, Name: k.Name, ExpiresAt: k.ExpiresAt}
	}
	return out
}

// budgetScope is one team or key with budgets.
type budgetScope struct {
	kind, team, key string
	limits          config.Limits
}

func (b budgetScope) id() string {
	if b.kind == "key" {
		return "key:" + b.team + "/" + b.key
	}
	return "team:" + b.team
}

// readings lists every limited budget of every team, config key and issued key with what is
// used of it now: spend from the ledger (which syncs the replicas' spend every second),
// today's tokens from the limiter's shared counters, read once for all scopes.
func (f figures) readings(ctx context.Context) []alerts.Reading {
	cfg := f.state()
	var scopes []budgetScope
	for _, t := range cfg.Teams {
		scopes = append(scopes, budgetScope{"team", t.Name, "", t.Limits})
		for _, k := range t.Keys {
			scopes = append(scopes, budgetScope{"key", t.Name, k.Name, k.Limits})
		}
	}
	// Teams created through the admin API have budgets like the config's (issue 45).
	for _, t := range f.issued.RuntimeTeams() {
		scopes = append(scopes, budgetScope{"team", t.Name, "", t.Limits})
	}
	for _, k := range f.issued.Keys() {
		scopes = append(scopes, budgetScope{"key", k.Team, k.Name, k.Limits})
	}
	var out []alerts.Reading
	var tokenScopes []ratelimit.Scope
	var tokenOf []budgetScope
	for _, s := range scopes {
		r := alerts.Reading{Scope: s.kind, Team: s.team, Key: s.key, Currency: cfg.Pricing.Currency}
		if f.ledger != nil && (s.limits.SpendPerDay > 0 || s.limits.SpendPerMonth > 0) {
			day, month := f.ledger.Spent(s.id())
			if s.limits.SpendPerDay > 0 {
				r.Budget, r.Used, r.Limit = alerts.BudgetSpendDay, day, s.limits.SpendPerDay
				out = append(out, r)
			}
			if s.limits.SpendPerMonth > 0 {
				r.Budget, r.Used, r.Limit = alerts.BudgetSpendMonth, month, s.limits.SpendPerMonth
				out = append(out, r)
			}
		}
		if s.limits.TokensPerDay > 0 {
			tokenScopes = append(tokenScopes, ratelimit.Scope{ID: s.id(), Limits: s.limits})
			tokenOf = append(tokenOf, s)
		}
	}
	if len(tokenScopes) == 0 || f.limiter == nil {
		return out
	}
	usage, err := f.limiter.Usage(ctx, tokenScopes)
	if err != nil {
		return out // the limiter's store is down: its budgets wait for the next check
	}
	for i, u := range usage {
		if i >= len(tokenOf) {
			break
		}
		s := tokenOf[i]
		out = append(out, alerts.Reading{Scope: s.kind, Team: s.team, Key: s.key, Budget: alerts.BudgetTokensDay,
			Used: float64(u.DayInputTokens + u.DayOutputTokens), Limit: float64(s.limits.TokensPerDay)})
	}
	return out
}

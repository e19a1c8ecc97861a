package accounting

import (
	"modelgate/billing"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// Crashed is the reason of a call a replica was killed holding: its next start charged it
// at its reservation (the usage_estimated of its log line, the outcome of its record).
const Crashed = "crashed"

// SettleCrashed charges a call a previous life of the replica admitted and never settled
// (the admission journal kept it): rec, filled from the journal, gets the usage u the
// limiter charged (its reservation, the documented upper bound); the cost of that usage at
// prices is charged to spend's scopes in the spend ledger (the hold died with the process:
// spend has none), and the call joins the usage history. It returns the cost in micro-units.
func (s Settler) SettleCrashed(rec *reqlog.Record, u ratelimit.Usage, spend Spend, prices billing.Prices) int64 {
	s.record(Charge{Usage: u, Unknown: Crashed}, rec)
	if rec.Team == "" || rec.Model == "" {
		return 0
	}
	bu := billing.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
	model := rec.PricedModel()
	cost := prices.Cost(model, bu)
	s.charge(spend, cost)
	if s.History != nil {
		s.recordHistory(rec, model, bu, cost)
	}
	return cost
}

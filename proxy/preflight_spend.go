package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/alerts"
	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/billing"
)

// holdSpend holds what the call may cost at most (its input estimate and output cap at the
// model's price) against the key's and the team's spend budgets, before the limiter admits
// it, or names the budget that refuses it; it answers nothing (refuseSpend does). The hold is
// settled with the real cost once the request is done (bill).
func (s *Server) holdSpend(c *gin.Context, st *state, p *auth.Principal, inputTokens, outputCap int64) *billing.Refusal {
	ri := info(c)
	return s.holdSpendFor(ri, st, p, ri.Model, inputTokens, outputCap)
}

// holdSpendFor is holdSpend for a request known by its requestInfo, at model's price: a
// fallback holds its own spend at its own price.
func (s *Server) holdSpendFor(ri *requestInfo, st *state, p *auth.Principal, model string, inputTokens, outputCap int64) *billing.Refusal {
	if s.ledger == nil || p.Team == "" {
		return nil
	}
	budgets, n := accounting.SpendBudgets(p, ri.EndUser)
	amount := st.prices.Estimate(model, inputTokens, outputCap)
	hold, refused := s.ledger.Reserve(budgets[:n], amount)
	if refused != nil && p.Shadow {
		ri.Refusal = "shadow_spend_" + refused.Period
		for i := range budgets { // charged, not limited: the spend is still counted
			budgets[i].PerDay, budgets[i].PerMonth = 0, 0
		}
		hold, refused = s.ledger.Reserve(budgets[:n], amount)
	}
	if refused == nil {
		ri.spend = hold
	}
	return refused
}

// refuseSpend answers a call a spend budget refused (apierr.SpendRefused), and tells the
// alerts which budget it was.
func (s *Server) refuseSpend(c *gin.Context, refused *billing.Refusal) {
	budget := alerts.BudgetSpendDay
	if refused.Period == "month" {
		budget = alerts.BudgetSpendMonth
	}
	s.noteExhausted(refused.Scope, budget)
	apierr.SpendRefused(c, refused, s.now())
}

package proxy

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/alerts"
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

// refuseSpend answers a call a spend budget refused, like a spent daily token budget: 429
// insufficient_quota, x-should-retry: false.
func (s *Server) refuseSpend(c *gin.Context, refused *billing.Refusal) {
	ri := info(c)
	now := s.now().UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	msg := "You exceeded your daily spend budget (%s). It resets at 00:00 UTC."
	ri.Refusal = "daily_spend"
	budget := alerts.BudgetSpendDay
	if refused.Period == "month" {
		budget = alerts.BudgetSpendMonth
		next = time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		msg = "You exceeded your monthly spend budget (%s). It resets on the first of the month at 00:00 UTC."
		ri.Refusal = "monthly_spend"
	}
	if refused.TooLarge {
		// Not spent, but this call could cost more than is left: a smaller output cap may fit.
		msg = "This call could cost more than what is left of your daily spend budget (%s); lower max_tokens, or wait until it resets at 00:00 UTC."
		if refused.Period == "month" {
			msg = "This call could cost more than what is left of your monthly spend budget (%s); lower max_tokens, or wait until it resets on the first of the month at 00:00 UTC."
		}
	}
	s.noteExhausted(refused.Scope, budget)
	peekLimitHeaders(c)
	c.Header("X-Should-Retry", "false")
	s.refuse(c, http.StatusTooManyRequests, typeQuota, "insufficient_quota", fmt.Sprintf(msg, scopeKind(refused.Scope)), next.Sub(now))
}

package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// settle settles the request's ticket with ch and records it for the access log, the metrics
// and, when the usage is estimated, the "billed, usage unknown" warning an operator
// reconciles against the platform's bill.
func (s *Server) settle(c *gin.Context, t *ratelimit.Ticket, ch accounting.Charge) {
	s.settleInfo(info(c), t, ch)
}

// settleInfo is settle for a request known by its requestInfo alone (a background job).
func (s *Server) settleInfo(ri *requestInfo, t *ratelimit.Ticket, ch accounting.Charge) {
	s.settler.SettleAfter(t, ch, ri.abandoned.Usage, &ri.Record)
}

// bill runs once a request is answered, or a background job ended, after settle: the spend
// hold settles with the real cost, the request joins the usage history
// (accounting.Settler.Bill), and its journal entry is cleared, since nothing is left for a
// next start to charge. It returns the cost in micro-units.
func (s *Server) bill(ri *requestInfo) int64 {
	prices := ri.prices
	if prices == nil {
		prices = s.state().prices // a caller never authenticated here
	}
	cost := s.settler.Bill(&ri.Record, ri.spendOf(ri.principal), prices)
	s.journal.Clear(ri.journaled)
	return cost
}

// spendOf is what ri holds against p's spend budgets, with the scopes a call that holds
// nothing is charged to: the key's, the team's, and the end user's daily one when the team
// limits it (the scopes its hold was taken against).
func (ri *requestInfo) spendOf(p *auth.Principal) accounting.Spend {
	spend := accounting.Spend{Hold: ri.spend}
	if p == nil {
		return spend
	}
	budgets, n := spendBudgets(p, ri.EndUser)
	spend.KeyScope, spend.TeamScope = budgets[0].Scope, budgets[1].Scope
	if n == 3 {
		spend.EndUserScope = budgets[2].Scope
	}
	return spend
}

// forAttempt is the record and spend of one attempt of ri's request that is billed on its own
// (a fallback's abandoned attempt, on model, failed as failure): both derived from the
// request's, so its end user, tags and end-user spend scope are the request's.
func (ri *requestInfo) forAttempt(p *auth.Principal, model, failure string) (reqlog.Record, accounting.Spend) {
	return ri.ForAttempt(model, failure), ri.spendOf(p)
}

package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/ratelimit"
)

// settle settles the request's ticket with ch and records it for the access log, the metrics
// and, when the usage is estimated, the "billed, usage unknown" warning an operator
// reconciles against the platform's bill.
func (s *Server) settle(c *gin.Context, t *ratelimit.Ticket, ch accounting.Charge) {
	s.settleInfo(info(c), t, ch)
}

// settleInfo is settle for a request known by its requestInfo alone (a background job).
func (s *Server) settleInfo(ri *requestInfo, t *ratelimit.Ticket, ch accounting.Charge) {
	s.settler.SettleAfter(t, ch, ri.abandoned, &ri.Record)
}

// settleBilling runs once a request is answered: the spend hold settles with the real cost
// and the request joins the usage history (accounting.Settler.Bill). It returns the cost in
// micro-units.
func (s *Server) settleBilling(ri *requestInfo) int64 {
	spend := accounting.Spend{Hold: ri.spend}
	if ri.principal != nil {
		spend.KeyScope, spend.TeamScope = ri.principal.ScopeID, ri.principal.TeamScopeID
	}
	prices := ri.prices
	if prices == nil {
		prices = s.state().prices // a caller never authenticated here (a background job's run)
	}
	return s.settler.Bill(&ri.Record, spend, prices)
}

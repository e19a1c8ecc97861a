package proxy

import (
	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
)

// settle is the one settlement of an admitted call, a route's (when its handler returns) or
// a background job's (when it ends): the ticket with ch and the usage of the attempts a
// fallback abandoned, and the record for the access log, the metrics and, when the usage is
// estimated, the "billed, usage unknown" warning. bill follows once it is answered.
func (s *Server) settle(ri *requestInfo, t *ratelimit.Ticket, ch accounting.Charge) {
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
// nothing is charged to (accounting.SpendOf).
func (ri *requestInfo) spendOf(p *auth.Principal) accounting.Spend {
	return accounting.SpendOf(ri.spend, p, ri.EndUser)
}

package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/journal"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// journalAdmit writes the admitted call to the admission journal before it leaves for the
// platform (a copy into the mapped segment file, journal/write.go). A journal that cannot be written does not refuse the call: a failing disk
// must not become the gateway's outage, and the call still settles as usual; only a kill during it
// would lose its usage. The failure is logged by the journal.
func (s *Server) journalAdmit(c *gin.Context, ri *requestInfo, p *auth.Principal, t *ratelimit.Ticket) {
	if s.journal == nil {
		return
	}
	e := journal.Entry{RequestID: ri.RequestID, Route: ri.Route, Team: ri.Team, Key: ri.Key,
		Model: reqlog.Printable(ri.Model, maxLoggedModel), UpstreamModel: ri.UpstreamModel, Stream: ri.Stream,
		EndUser: ri.EndUser, Tags: ri.Tags, InputReserved: ri.InputReserved,
		StartedMs: ri.Start.UnixMilli(), Ticket: t.State()}
	if ri.spend != nil {
		// The hold's key and team scopes, and apart from them the end user's daily one,
		// which keeps no monthly total.
		spend := ri.spendOf(p)
		e.SpendScopes, e.EndUserSpend = []string{spend.KeyScope, spend.TeamScope}, spend.EndUserScope
	}
	ri.journaled, _ = s.journal.Admit(c.Request.Context(), &e)
}

// SettleCrashed charges every call the replica's previous life left open in its journal (it
// was killed with them in flight): each at its reservation, in the limiter (which frees its
// concurrency slot at once), the spend ledger and the usage history, with one access log
// line with outcome "crashed". Run at start, before serving. The entries are removed only
// once what they were charged is written, so a kill during this charges them again rather
// than never. It returns how many calls it charged.
func (s *Server) SettleCrashed(ctx context.Context) (int, error) {
	if s.journal == nil {
		return 0, nil
	}
	left, err := s.journal.Leftover(ctx)
	if err != nil || len(left) == 0 {
		return 0, err
	}
	prices := s.state().prices
	n := 0
	for _, l := range left {
		e := l.Entry
		if len(e.Ticket.Scopes) == 0 {
			continue // unreadable, already logged: nothing to charge it with
		}
		u, err := s.limiter.SettleCrashed(ctx, e.Ticket)
		if err != nil {
			// Redis keeps a failed settle and sends it again in the background.
			s.log.Warn("crashed call: limiter settle failed", slog.String("request_id", e.RequestID), slog.String("error", err.Error()))
			u = ratelimit.Usage{InputTokens: min(e.Ticket.Input, e.Ticket.Tokens), OutputTokens: e.Ticket.Tokens - min(e.Ticket.Input, e.Ticket.Tokens)}
		}
		rec := reqlog.Record{Start: time.UnixMilli(e.StartedMs), RequestID: e.RequestID, Route: e.Route,
			Team: e.Team, Key: e.Key, Model: e.Model, UpstreamModel: e.UpstreamModel, Stream: e.Stream,
			EndUser: e.EndUser, Tags: e.Tags, InputReserved: e.InputReserved, Admitted: true}
		spend := accounting.Spend{EndUserScope: e.EndUserSpend}
		if len(e.SpendScopes) == 2 { // the key's and the team's (journalAdmit)
			spend.KeyScope, spend.TeamScope = e.SpendScopes[0], e.SpendScopes[1]
		}
		cost := s.settler.SettleApart(accounting.ChargeFor(u, accounting.Ending{How: accounting.Killed}), &rec, spend, prices)
		sum := rec.Summary(http.MethodPost, 0, maxLoggedModel)
		sum.CostMicros, sum.Outcome = cost, accounting.Crashed
		s.logRequest(sum)
		if s.hooks.RequestDone != nil {
			s.hooks.RequestDone(sum)
		}
		n++
	}
	if err := s.flushCrashed(ctx); err != nil {
		return n, err
	}
	return n, s.journal.Forget(ctx, left)
}

// flushCrashed writes what SettleCrashed charged before its entries are forgotten.
func (s *Server) flushCrashed(ctx context.Context) error {
	if err := s.limiter.Flush(); err != nil {
		return err
	}
	if s.ledger != nil {
		if err := s.ledger.Flush(ctx); err != nil {
			return err
		}
	}
	if s.history != nil {
		return s.history.Flush(ctx)
	}
	return nil
}

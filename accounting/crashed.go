package accounting

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/journal"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// JournalEntry is an admitted call's entry in the admission journal: what SettleCrashed
// needs to charge it at its reservation should the replica be killed before it settles.
// The model is capped at maxModel bytes, as it is logged. A call that holds spend (hold)
// keeps the hold's key and team scopes, and apart from them the end user's daily one, which
// keeps no monthly total.
func JournalEntry(rec *reqlog.Record, hold *billing.Hold, p *auth.Principal, t *ratelimit.Ticket, maxModel int) journal.Entry {
	e := journal.Entry{RequestID: rec.RequestID, Route: rec.Route, Team: rec.Team, Key: rec.Key,
		Model: reqlog.Printable(rec.Model, maxModel), UpstreamModel: rec.UpstreamModel, Stream: rec.Stream,
		EndUser: rec.EndUser, Tags: rec.Tags, InputReserved: rec.InputReserved,
		StartedMs: rec.Start.UnixMilli(), Ticket: t.State()}
	if hold != nil {
		spend := SpendOf(hold, p, rec.EndUser)
		e.SpendScopes, e.EndUserSpend = []string{spend.KeyScope, spend.TeamScope}, spend.EndUserScope
	}
	return e
}

// SettleCrashed charges every call the replica's previous life left open in its journal j
// (it was killed with them in flight): each at its reservation, in the limiter l (which
// frees its concurrency slot at once), the spend ledger and the usage history, priced with
// prices, and handed to report, which writes its access-log line (outcome "crashed") and
// tells the observers. The entries are removed only once what they were charged is
// written, so a kill during this charges them again rather than never. It returns how many
// calls it charged.
func (s Settler) SettleCrashed(ctx context.Context, j *journal.Journal, l *ratelimit.Limiter, prices billing.Prices, maxModel int, report func(reqlog.RequestSummary)) (int, error) {
	left, err := j.Leftover(ctx)
	if err != nil || len(left) == 0 {
		return 0, err
	}
	n := 0
	for _, lo := range left {
		e := lo.Entry
		if len(e.Ticket.Scopes) == 0 {
			continue // unreadable, already logged: nothing to charge it with
		}
		u, err := l.SettleCrashed(ctx, e.Ticket)
		if err != nil {
			// Redis keeps a failed settle and sends it again in the background.
			s.Log.Warn("crashed call: limiter settle failed", slog.String("request_id", e.RequestID), slog.String("error", err.Error()))
			u = ratelimit.Usage{InputTokens: min(e.Ticket.Input, e.Ticket.Tokens), OutputTokens: e.Ticket.Tokens - min(e.Ticket.Input, e.Ticket.Tokens)}
		}
		rec := reqlog.Record{Start: time.UnixMilli(e.StartedMs), RequestID: e.RequestID, Route: e.Route,
			Team: e.Team, Key: e.Key, Model: e.Model, UpstreamModel: e.UpstreamModel, Stream: e.Stream,
			EndUser: e.EndUser, Tags: e.Tags, InputReserved: e.InputReserved, Admitted: true}
		spend := Spend{EndUserScope: e.EndUserSpend}
		if len(e.SpendScopes) == 2 { // the key's and the team's (as proxy journals them)
			spend.KeyScope, spend.TeamScope = e.SpendScopes[0], e.SpendScopes[1]
		}
		cost := s.SettleApart(ChargeFor(u, Ending{How: Killed}), &rec, spend, prices)
		sum := rec.Summary(http.MethodPost, 0, maxModel)
		sum.CostMicros, sum.Outcome = cost, Crashed
		report(sum)
		n++
	}
	if err := s.flushCrashed(ctx, l); err != nil {
		return n, err
	}
	return n, j.Forget(ctx, left)
}

// flushCrashed writes what SettleCrashed charged before its entries are forgotten.
func (s Settler) flushCrashed(ctx context.Context, l *ratelimit.Limiter) error {
	if err := l.Flush(); err != nil {
		return err
	}
	if s.Ledger != nil {
		if err := s.Ledger.Flush(ctx); err != nil {
			return err
		}
	}
	if s.History != nil {
		return s.History.Flush(ctx)
	}
	return nil
}

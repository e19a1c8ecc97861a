package proxy

import (
	"context"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// journalAdmit writes the admitted call to the admission journal before it leaves for the
// platform (accounting.JournalEntry, copied into the mapped segment file, journal/write.go).
// A journal that cannot be written does not refuse the call: a failing disk must not become
// the gateway's outage, and the call still settles as usual; only a kill during it would
// lose its usage. The failure is logged by the journal.
func (s *Server) journalAdmit(c *gin.Context, ri *requestInfo, p *auth.Principal, t *ratelimit.Ticket) {
	if s.journal == nil {
		return
	}
	e := accounting.JournalEntry(&ri.Record, ri.spend, p, t, maxLoggedModel)
	ri.journaled, _ = s.journal.Admit(c.Request.Context(), &e)
}

// SettleCrashed charges every call the replica's previous life left open in its journal
// (accounting.Settler.SettleCrashed), each with one access-log line, outcome "crashed".
// Run at start, before serving. It returns how many calls it charged.
func (s *Server) SettleCrashed(ctx context.Context) (int, error) {
	if s.journal == nil {
		return 0, nil
	}
	return s.settler.SettleCrashed(ctx, s.journal, s.limiter, s.state().prices, maxLoggedModel, func(sum reqlog.RequestSummary) {
		s.logRequest(sum)
		if s.hooks.RequestDone != nil {
			s.hooks.RequestDone(sum)
		}
	})
}

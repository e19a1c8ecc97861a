package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/sjson"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/journal"
	"modelgate/stored"
	"modelgate/storedapi"
)

// Background responses (POST /v1/responses with background: true) are run by package jobs;
// what stays here is their HTTP side: the submission and the platform call a job makes
// (background_call.go); the cancel route is storedapi's (Service.Cancel).

// DrainBackground lets running background responses finish until ctx ends, then cancels
// the rest, which are recorded failed and settled. New ones are refused from then on. Call
// it after StartDrain, with the drain deadline.
func (s *Server) DrainBackground(ctx context.Context) { s.bg.Drain(ctx) }

// submitBackground starts a background response the preflight admitted (its job holds a
// place in the team's queue): it records the queued response, answers it, and starts the
// job.
func (s *Server) submitBackground(c *gin.Context, a *admission, job *jobs.Job, turn *storedTurn) {
	ri := info(c)
	st, p, ticket, reserve, id := a.st, a.p, a.ticket, a.reserve, job.ID()
	obj := jobs.QueuedObject(id, turn.model, turn.parent, s.now().Unix())
	rec := &stored.Record{ID: id, Parent: turn.parent, Status: stored.StatusQueued, Model: turn.model, Input: turn.input, Response: obj}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := s.bg.Record(ctx, st.keeper, job, rec); err != nil {
		ticket.Release()
		s.bg.Abandon(job)
		s.kept.Unavailable(c, err)
		return
	}
	body, err := backgroundUpstreamBody(a.call.upBody)
	if err != nil { // cannot happen for a body that was parsed already; answered as any other
		ticket.Release()
		s.bg.Abandon(job)
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_json", "", "The request body could not be prepared.")
		return
	}
	// The job settles and bills the call when it ends: its record is derived from this
	// request's (the caller, the model, the attribution, the estimates), it takes the spend
	// hold along, and this request records nothing of its own.
	jobInfo := &requestInfo{Record: ri.Derive(), principal: p, limits: s.limiter, spend: ri.spend, prices: st.prices}
	jobInfo.Start, jobInfo.Route, jobInfo.Admitted = time.Now(), "/v1/responses", true
	ri.spend, ri.BilledLater = nil, true
	jobInfo.journaled, ri.journaled = ri.journaled, journal.Handle{} // cleared when the job has settled
	s.bg.Start(job, jobs.Work{Keeper: st.keeper, Reserve: reserve, Record: jobInfo.Record,
		Call: &backgroundCall{s: s, st: st, p: p, ri: jobInfo, body: body, reserve: reserve},
		Settle: func(ch accounting.Charge) int64 {
			s.settle(jobInfo, ticket, ch)
			return s.bill(jobInfo)
		}})
	c.Data(http.StatusOK, "application/json", obj)
}

// backgroundUpstreamBody is the body the job sends: a plain streamed call (streaming lets a
// cancel end it at once, and tells when the platform started).
func backgroundUpstreamBody(body []byte) ([]byte, error) {
	body, err := storedapi.DeleteAll(body, "background")
	if err != nil {
		return nil, err
	}
	if body, err = storedapi.DeleteAll(body, "stream"); err != nil {
		return nil, err
	}
	return sjson.SetBytes(body, "stream", true)
}

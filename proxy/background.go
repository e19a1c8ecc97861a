package proxy

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/journal"
	"modelgate/stored"
)

// Background responses (POST /v1/responses with background: true) are run by package jobs;
// what stays here is their HTTP side: the submission, the cancel route, and the platform
// call a job makes (background_call.go).

// DrainBackground lets running background responses finish until ctx ends, then cancels
// the rest, which are recorded failed and settled. New ones are refused from then on. Call
// it after StartDrain, with the drain deadline.
func (s *Server) DrainBackground(ctx context.Context) { s.bg.Drain(ctx) }

// checkOrphan is jobs.Registry.CheckOrphan over the state's keeper.
func (s *Server) checkOrphan(ctx context.Context, st *state, owner string, r *stored.Record) *stored.Record {
	return s.bg.CheckOrphan(ctx, st.keeper, owner, r)
}

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
		s.storeUnavailable(c, err)
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
	body, err := deleteAll(body, "background")
	if err != nil {
		return nil, err
	}
	if body, err = deleteAll(body, "stream"); err != nil {
		return nil, err
	}
	return sjson.SetBytes(body, "stream", true)
}

// cancelResponse answers POST /v1/responses/{id}/cancel: a running background response is
// stopped (its platform call ended) and answered cancelled; a finished one is answered as it
// is, as OpenAI does (cancelling is idempotent). Only background responses can be cancelled.
func (s *Server) cancelResponse(c *gin.Context) {
	r, st, who, ok := s.keptRecord(c, "/v1/responses/{id}/cancel")
	if !ok {
		return
	}
	if !gjson.GetBytes(r.Response, "background").Bool() {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_request", "",
			"Only responses created with background=true can be cancelled.")
		return
	}
	ctx, id := c.Request.Context(), r.ID
	r, err := s.bg.Cancel(ctx, st.keeper, who, r)
	switch {
	case errors.Is(err, stored.ErrNotFound):
		responseNotFound(c, id)
		return
	case err != nil && ctx.Err() != nil: // the client left while the job was stopping
		return
	case err != nil:
		s.storeUnavailable(c, err)
		return
	}
	s.writeResponseObject(c, r)
}

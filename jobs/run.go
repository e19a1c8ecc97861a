package jobs

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/stored"
)

// Route names background jobs in metrics and logs.
const Route = "/v1/responses (background)"

// statusClientClosedRequest is how a client's cancel shows in request metrics (nginx's 499).
const statusClientClosedRequest = 499

// maxLoggedModel bounds the model name a job logs, as the server bounds a request's.
const maxLoggedModel = 128

// Caller makes a job's platform call. The server implements it with its gateway and event
// reader; the job only needs to know how the call ended.
type Caller interface {
	// Call makes the call under ctx, which ends on a cancel or a shutdown, and calls
	// started once, when the platform began to answer.
	Call(ctx context.Context, started func()) Outcome
}

// Outcome is how a job's platform call ended.
type Outcome struct {
	// Status is the final stored status (completed, incomplete, failed). Ignored when Cut.
	Status string
	// Cut says ctx ended the call: the job itself decides cancelled (its client) or
	// failed (a shutdown).
	Cut bool
	// Final is the platform's response object when it sent one; nil otherwise.
	Final []byte
	// Error is recorded when there is no Final object.
	Error ResponseError
	// Output is the output items finished so far (a JSON array); nil when none.
	Output []byte
	// Charge is what the call is settled at.
	Charge accounting.Charge
	// UpstreamErr names the kind of failure for logs and metrics; "" when none.
	UpstreamErr string
	// FailStatus is the platform's HTTP status when it refused the call; 0 otherwise.
	FailStatus int
	// ServedModel is the fallback model that served the call (issue 27); "" when the
	// model asked for did.
	ServedModel string
}

// Work is a job to start: the platform call, how its end is settled, and who it is for.
type Work struct {
	Keeper *stored.Keeper // holds the job's record and claim
	Call   Caller
	// Settle settles and bills the call once, before the job's record shows it ended, and
	// returns its cost in micro-units (0 when not billed).
	Settle func(accounting.Charge) (costMicros int64)
	// Reserve is what admission reserved: what a job that panicked is charged at most.
	Reserve ratelimit.Usage
	// Record is the job's request, derived from its submission's record (reqlog.Record.Derive):
	// its ids, caller, model (client-facing), attribution and estimates, Start when it was
	// submitted. The job's metrics summary and log line are read from it, as a request's are
	// from its own.
	Record reqlog.Record
}

// Start runs j in a goroutine of its own until it ends, then forgets it. Its record must
// already be kept and claimed (see Record).
func (b *Registry) Start(j *Job, w Work) {
	r := &run{reg: b, job: j, w: w}
	go r.run()
}

// run is one running background response.
type run struct {
	reg *Registry
	job *Job
	w   Work

	// How far the job's end got (see end): each step is done once, even when a panic
	// makes the job end a second time.
	settled, reported, logged bool
	ended                     Outcome // what was settled, reported and logged
	cost                      int64   // what Settle billed, in micro-units
}

func (r *run) run() {
	defer r.reg.Abandon(r.job)
	if r.reg.hooks.RequestStarted != nil { // both hooks are set, or neither
		r.reg.hooks.RequestStarted()
	}
	defer func() {
		if v := recover(); v != nil {
			r.reg.log.Error("background response panic", slog.String("request_id", r.w.Record.RequestID), slog.Any("panic", v))
			// Charged the reservation's bound unless it was settled before the panic.
			r.end(Outcome{Status: stored.StatusFailed, Error: panicError,
				Charge: accounting.ChargeFor(r.w.Reserve, accounting.Ending{How: accounting.PlatformCut})})
		}
	}()
	stopBeat := r.heartbeat()
	defer stopBeat() // runs before the recovery above ends the job: no renewal may land after its claim is dropped

	o := r.w.Call.Call(r.job.ctx, func() { r.progress(stored.StatusInProgress) })
	if o.Cut {
		o.Status, o.Error = r.cutShort(), r.cutError()
	}
	stopBeat() // no renewal may land after finish drops the claim
	r.end(o)
}

// end is the one order in which every job's end is made known, however it ended: settled
// (budgets, the spend ledger, the usage history), reported to the metrics as a request of
// its own, logged, and only then recorded, so a client that reads the end in the record
// finds it counted everywhere already. The first outcome given is the one settled, reported
// and logged; the last one given is recorded (a panic past settlement records itself failed
// without billing the job twice).
func (r *run) end(o Outcome) {
	if !r.settled {
		r.settled, r.ended = true, o
		r.cost = r.w.Settle(o.Charge)
	}
	if !r.reported && r.reg.hooks.RequestDone != nil {
		r.reported = true
		r.report()
	}
	if !r.logged {
		r.logged = true
		r.logEnd()
	}
	r.finish(o)
}

// report counts the job's end in the request metrics.
func (r *run) report() { r.reg.hooks.RequestDone(r.summary()) }

// logEnd writes the job's own line, its access-log entry: a request's line (the same
// summary the metrics got) under "background response", with the status the record ends in.
func (r *run) logEnd() {
	sum := r.summary()
	sum.Log(r.reg.log, "background response", slog.String("response_status", r.ended.Status))
}

// summary is the job's end as a request's: its record's fields, with the route, the status
// and the charge of its end.
func (r *run) summary() reqlog.RequestSummary {
	o := r.ended
	sum := r.w.Record.Summary(http.MethodPost, r.httpStatus(o), maxLoggedModel)
	sum.Route, sum.ServedModel, sum.CostMicros = Route, o.ServedModel, r.cost
	sum.InputTokens, sum.OutputTokens, sum.UsageEstimated = o.Charge.Usage.InputTokens, o.Charge.Usage.OutputTokens, o.Charge.Unknown
	sum.ErrorCode, sum.UpstreamErr = o.Error.Code, o.UpstreamErr
	return sum
}

// httpStatus is how a job's end shows in request metrics: 200 for an answer (complete or
// not), 499 for a client's cancel, 503 for a shutdown, and the platform's status (502 when
// it gave none) for a failure.
func (r *run) httpStatus(o Outcome) int {
	switch {
	case o.Status == stored.StatusCancelled:
		return statusClientClosedRequest
	case o.Status != stored.StatusFailed:
		return http.StatusOK
	case errors.Is(context.Cause(r.job.ctx), errShutdown):
		return http.StatusServiceUnavailable
	case o.FailStatus != 0:
		return o.FailStatus
	}
	return http.StatusBadGateway
}

// heartbeat renews the job's claim while it runs, and stops the job when its record was
// cancelled through another replica.
func (r *run) heartbeat() (stop func()) {
	every := r.reg.lease / 3
	k, owner, id := r.w.Keeper, r.job.owner, r.job.id
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			if err := k.Claim(ctx, owner, id, r.reg.instance, r.reg.claimTTL()); err != nil {
				r.reg.log.Warn("background response: claim not renewed", slog.String("request_id", r.w.Record.RequestID), slog.String("error", err.Error()))
			}
			// Cancelled or deleted through another replica: the platform call is not wanted.
			if cur, err := k.Get(ctx, owner, id); errors.Is(err, stored.ErrNotFound) || err == nil && cur.Status == stored.StatusCancelled {
				r.job.cancel(errCancelledByClient)
			}
			cancel()
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); wg.Wait() }) }
}

// cutShort is the status of a job its context ended: cancelled by the client, or failed by
// a shutdown.
func (r *run) cutShort() string {
	if errors.Is(context.Cause(r.job.ctx), errShutdown) {
		return stored.StatusFailed
	}
	return stored.StatusCancelled
}

func (r *run) cutError() ResponseError {
	if errors.Is(context.Cause(r.job.ctx), errShutdown) {
		return shutdownError
	}
	return ResponseError{}
}

// progress records that the job moved on (in_progress), unless it was cancelled meanwhile.
func (r *run) progress(status string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	k := r.w.Keeper
	cur, err := k.Get(ctx, r.job.owner, r.job.id)
	if err != nil || !stored.Unfinished(cur.Status) {
		return
	}
	cur.Status = status
	cur.Response = objectWith(cur.Response, status, ResponseError{}, nil, 0)
	if err := k.Update(ctx, r.job.owner, cur); err != nil {
		r.reg.log.Warn("background response: progress not recorded", slog.String("request_id", r.w.Record.RequestID), slog.String("error", err.Error()))
	}
}

// finish records how the job ended and drops its claim. A record cancelled meanwhile
// through another replica stays cancelled.
func (r *run) finish(o Outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	k, owner, id := r.w.Keeper, r.job.owner, r.job.id
	defer func() {
		if err := k.Release(ctx, owner, id); err != nil {
			r.reg.log.Warn("background response: claim not released", slog.String("request_id", r.w.Record.RequestID), slog.String("error", err.Error()))
		}
	}()
	cur, err := k.Get(ctx, owner, id)
	if err != nil {
		if !errors.Is(err, stored.ErrNotFound) { // deleted meanwhile: nothing to record
			r.reg.log.Error("background response: result not recorded", slog.String("request_id", r.w.Record.RequestID), slog.String("error", err.Error()))
		}
		return
	}
	status, final, rerr, output := o.Status, o.Final, o.Error, o.Output
	if cur.Status == stored.StatusCancelled && status != stored.StatusCancelled {
		status, final, rerr = stored.StatusCancelled, nil, ResponseError{}
	}
	rec := &stored.Record{ID: id, Parent: cur.Parent, Status: status, Model: cur.Model, Input: cur.Input}
	now := r.reg.now().Unix()
	if final != nil {
		rec.Response = objectWith(finalObject(final, cur), status, rerr, nil, now)
	} else {
		if output == nil {
			output = []byte("[]")
		}
		rec.Response = objectWith(cur.Response, status, rerr, output, now)
	}
	if err := k.Update(ctx, owner, rec); err != nil && !errors.Is(err, stored.ErrNotFound) {
		r.reg.log.Error("background response: result not recorded", slog.String("request_id", r.w.Record.RequestID), slog.String("error", err.Error()))
	}
}

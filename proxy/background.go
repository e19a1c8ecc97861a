package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/store"
	"modelgate/stored"
	"modelgate/translate"
)

// Background responses (POST /v1/responses with background: true) are run by modelgate
// itself: the client gets a queued response object at once, and the platform call (a plain
// streamed one: the platform never sees "background") runs in a goroutine of this instance,
// which records its progress in the stored-responses record of that id. The admission ticket
// taken at submission is held until the job ends, so a running job keeps its concurrency slot
// and its reservation, and is settled once, with the real usage.
//
// Who runs a job: the instance that accepted it, named by a claim in the record store that
// the runner renews while it runs (stored.Keeper.Claim). A job whose claim is gone, or (with
// the embedded store, which one process owns) names a previous life of this process, has lost
// its runner: whoever reads it marks it failed.

const (
	// backgroundLease is how long a job's claim outlives a runner that stopped renewing it:
	// the longest a job cut by a crash shows as unfinished with a shared store.
	backgroundLease = 30 * time.Second
	// cancelWait bounds how long a cancel waits for the job to record itself cancelled.
	cancelWait = 10 * time.Second
	// shutdownWait bounds the wait for cancelled jobs to record their end at shutdown.
	shutdownWait = 10 * time.Second
)

var (
	errCancelledByClient = errors.New("cancelled by the client")
	errShutdown          = errors.New("modelgate is shutting down")
)

// backgroundJobs are the jobs this instance runs.
type backgroundJobs struct {
	instance  string        // this process's id in claims: random per start
	lease     time.Duration // claim lifetime; renewed every third of it
	exclusive bool          // the record store is this process's alone (embedded)

	mu       sync.Mutex
	jobs     map[string]*bgJob // owner + "\x00" + id
	perOwner map[string]int64
	closed   bool
	wg       sync.WaitGroup
}

type bgJob struct {
	owner, id string
	ctx       context.Context
	cancel    context.CancelCauseFunc
	done      chan struct{}
}

func newBackgroundJobs(exclusive bool) *backgroundJobs {
	return &backgroundJobs{instance: "mg_" + randomHex(12), lease: backgroundLease, exclusive: exclusive,
		jobs: map[string]*bgJob{}, perOwner: map[string]int64{}}
}

// claimTTL is how long a claim lives unrenewed. On the embedded store it never expires: the
// next start of this process finds every claim its previous life left, however long it was
// down, and fails their records (reapOrphans).
func (b *backgroundJobs) claimTTL() time.Duration {
	if b.exclusive {
		return 0
	}
	return b.lease
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

func jobKey(owner, id string) string { return owner + "\x00" + id }

// add registers a new job of owner unless owner has max unfinished already (max <= 0: no
// cap) or the instance is shutting down.
func (b *backgroundJobs) add(owner, id string, max int64) (*bgJob, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || (max > 0 && b.perOwner[owner] >= max) {
		return nil, false
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	j := &bgJob{owner: owner, id: id, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	b.jobs[jobKey(owner, id)] = j
	b.perOwner[owner]++
	b.wg.Add(1)
	return j, true
}

// remove forgets a job that has ended (or never started).
func (b *backgroundJobs) remove(j *bgJob) {
	b.mu.Lock()
	delete(b.jobs, jobKey(j.owner, j.id))
	if b.perOwner[j.owner]--; b.perOwner[j.owner] <= 0 {
		delete(b.perOwner, j.owner)
	}
	b.mu.Unlock()
	j.cancel(nil)
	close(j.done)
	b.wg.Done()
}

func (b *backgroundJobs) lookup(owner, id string) *bgJob {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.jobs[jobKey(owner, id)]
}

// stop refuses new jobs, waits for the running ones until ctx ends, then cancels what is
// left (they record themselves failed) and waits for them to write that, a bounded while.
func (b *backgroundJobs) stop(ctx context.Context, log *slog.Logger) {
	b.mu.Lock()
	b.closed = true
	n := len(b.jobs)
	b.mu.Unlock()
	if n == 0 {
		return
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	b.mu.Lock()
	for _, j := range b.jobs {
		j.cancel(errShutdown)
	}
	n = len(b.jobs)
	b.mu.Unlock()
	log.Warn("background responses still running at shutdown were cancelled", slog.Int("jobs", n))
	select {
	case <-done:
	case <-time.After(shutdownWait):
		log.Error("background responses did not record their end in time")
	}
}

// DrainBackground lets running background responses finish until ctx ends, then cancels
// the rest, which are recorded failed and settled. New ones are refused from then on. Call
// it after StartDrain, with the drain deadline.
func (s *Server) DrainBackground(ctx context.Context) { s.bg.stop(ctx, s.log) }

// reapOrphans marks failed the background responses a previous life of this process left
// unfinished: with the embedded store every claim found at start-up is of a process that is
// gone. (A shared store's claims expire on their own; readers reap those, see checkOrphan.)
func (s *Server) reapOrphans() {
	if s.keeper == nil || !s.bg.exclusive {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := s.now().Unix()
	n, err := s.keeper.ReapOrphans(ctx, func(instance string) bool { return instance != s.bg.instance },
		func(r *stored.Record) { endRecord(r, stored.StatusFailed, restartError, now) })
	if err != nil {
		s.log.Error("background responses of the previous run could not be marked failed", slog.String("error", err.Error()))
	}
	if n > 0 {
		s.log.Warn("background responses cut by a restart were marked failed", slog.Int("responses", n))
	}
}

// The error a job cut by a restart or a shutdown records. OpenAI's response error codes are
// a closed list; server_error is the one that fits.
var (
	restartError  = responseError{"server_error", "modelgate restarted before this background response was complete; submit it again."}
	shutdownError = responseError{"server_error", "modelgate shut down before this background response was complete; submit it again."}
)

type responseError struct{ code, message string }

// endRecord turns an unfinished record into a final one of status, with err (if any) as
// its error. The output stays what it was (none, for a record that never got an answer).
func endRecord(r *stored.Record, status string, err responseError, now int64) {
	r.Status = status
	r.Response = objectWith(r.Response, status, err, nil, now)
}

// objectWith is a response object with its status, error and (when output is set) output
// replaced; a completed one gets its completed_at if it has none.
func objectWith(obj []byte, status string, e responseError, output []byte, now int64) []byte {
	b, _ := sjson.SetBytes(obj, "status", status)
	if e.code != "" {
		b, _ = sjson.SetRawBytes(b, "error", mustJSON(map[string]string{"code": e.code, "message": e.message}))
	}
	if output != nil {
		b, _ = sjson.SetRawBytes(b, "output", output)
	}
	if status == stored.StatusCompleted && gjson.GetBytes(b, "completed_at").Type == gjson.Null {
		b, _ = sjson.SetBytes(b, "completed_at", now)
	}
	return b
}

// mustJSON marshals a value that always marshals (strings, numbers, plain structs).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// queuedObject is the response object a background response starts as: OpenAI's shape,
// with the fields a client reads before there is an answer.
func queuedObject(id, model, parent string, createdAt int64) []byte {
	var prev any
	if parent != "" {
		prev = parent
	}
	return mustJSON(struct {
		ID                 string   `json:"id"`
		Object             string   `json:"object"`
		CreatedAt          int64    `json:"created_at"`
		Status             string   `json:"status"`
		Background         bool     `json:"background"`
		Model              string   `json:"model"`
		Output             []string `json:"output"`
		Error              any      `json:"error"`
		IncompleteDetails  any      `json:"incomplete_details"`
		PreviousResponseID any      `json:"previous_response_id"`
		Store              bool     `json:"store"`
		Usage              any      `json:"usage"`
	}{id, "response", createdAt, stored.StatusQueued, true, model, []string{}, nil, nil, prev, true, nil})
}

// submitBackground accepts a background response: it checks the team's cap of unfinished
// jobs, admits the request as any other (reservation and concurrency slot), records the
// queued response, answers it, and starts the job.
func (s *Server) submitBackground(c *gin.Context, st *state, p *auth.Principal, req checkedResponses) {
	ri := info(c)
	turn := req.turn
	id := "resp_" + randomHex(24)
	limit := st.cfg.Responses.BackgroundMaxQueuedPerTeam
	job, ok := s.bg.add(turn.owner, id, limit)
	if !ok {
		ri.refusal = "background_queue"
		peekLimitHeaders(c)
		if s.draining.Load() {
			abortOpenAI(c, http.StatusServiceUnavailable, typeServer, "shutting_down", "", "modelgate is shutting down; retry on another instance")
			return
		}
		abortOpenAI(c, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "",
			"Too many unfinished background responses ("+strconv.FormatInt(limit, 10)+" at most per team); wait for one to finish or cancel one.")
		return
	}
	if !s.reserveSpend(c, st, p, req.inputEstimate, req.outCap, true) {
		s.bg.remove(job)
		return
	}
	reserve := ratelimit.Usage{InputTokens: req.inputEstimate, OutputTokens: req.outCap}
	ticket := s.admit(c, p, reserve, true)
	if ticket == nil {
		s.bg.remove(job)
		return
	}
	obj := queuedObject(id, turn.model, turn.parent, s.now().Unix())
	rec := &stored.Record{ID: id, Parent: turn.parent, Status: stored.StatusQueued, Model: turn.model, Input: turn.input, Response: obj}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	// The claim first: a reader on another replica must never find the record without it.
	err := st.keeper.Claim(ctx, turn.owner, id, s.bg.instance, s.bg.claimTTL())
	if err == nil {
		// Written before the client hears of the id: a crash must not make it unknown.
		if err = st.keeper.KeepDurable(ctx, turn.owner, rec); err != nil {
			_ = st.keeper.Release(ctx, turn.owner, id)
		}
	}
	if err != nil {
		ticket.Release()
		s.bg.remove(job)
		storeUnavailable(c, err)
		return
	}
	body, err := backgroundUpstreamBody(req.body)
	if err != nil { // cannot happen for a body that was parsed already; answered as any other
		ticket.Release()
		s.bg.remove(job)
		abortOpenAI(c, http.StatusBadRequest, typeInvalidRequest, "invalid_json", "", "The request body could not be prepared.")
		return
	}
	// The job settles and bills the call when it ends: it takes the spend hold along, and
	// this request records nothing of its own.
	jobInfo := &requestInfo{start: time.Now(), requestID: ri.requestID, srv: s, route: "/v1/responses",
		team: ri.team, keyName: ri.keyName, principal: p, model: ri.model, admitted: true, spend: ri.spend}
	ri.spend, ri.billedLater = nil, true
	r := &bgRun{s: s, st: st, p: p, job: job, ticket: ticket, rec: rec, body: body, ri: jobInfo,
		reserve: reserve, requestID: ri.requestID, team: ri.team, key: ri.keyName, started: jobInfo.start}
	go r.run()
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

// bgRun is one running background response.
type bgRun struct {
	s           *Server
	st          *state
	p           *auth.Principal
	job         *bgJob
	ticket      *ratelimit.Ticket
	rec         *stored.Record
	body        []byte
	ri          *requestInfo    // the job's own record for settling, billing and the platform call
	reserve     ratelimit.Usage // what admission reserved: input estimate and output cap
	requestID   string
	team, key   string
	started     time.Time
	upstreamErr string
	failStatus  int // the platform's HTTP status when it refused the call
}

func (r *bgRun) run() {
	defer r.s.bg.remove(r.job)
	defer func() {
		if v := recover(); v != nil {
			r.s.log.Error("background response panic", slog.String("request_id", r.requestID), slog.Any("panic", v))
			r.s.settleInfo(r.ri, r.ticket, accounting.UpperBound(r.reserve, ratelimit.Usage{}, accounting.StreamCut))
			r.s.settleBilling(r.ri)
			r.finish(stored.StatusFailed, nil, responseError{"server_error", "modelgate failed while running this background response."}, nil)
		}
	}()
	stopBeat := r.heartbeat()
	defer stopBeat()
	status, rerr, ch, cost := stored.StatusFailed, responseError{}, accounting.Charge{}, int64(0)
	reported := false
	report := func() {
		// The job's end is reported like a request of its own, so its tokens, duration
		// and upstream errors reach the metrics.
		if reported || r.s.hooks.RequestStarted == nil { // both hooks are set, or neither
			return
		}
		reported = true
		r.s.hooks.RequestDone(reqlog.RequestSummary{RequestID: r.requestID, Route: backgroundRoute, Method: http.MethodPost,
			Team: r.team, Key: r.key, Model: printable(r.rec.Model, maxLoggedModel), Status: r.httpStatus(status),
			Duration: time.Since(r.started), InputTokens: ch.Usage.InputTokens, OutputTokens: ch.Usage.OutputTokens,
			ErrorCode: rerr.code, UpstreamErr: r.upstreamErr, UsageEstimated: ch.Unknown, CostMicros: cost})
	}
	if r.s.hooks.RequestStarted != nil {
		r.s.hooks.RequestStarted()
		defer report() // a panic's end too
	}

	var final, output []byte
	status, final, rerr, output, ch = r.call()
	stopBeat() // no renewal may land after finish drops the claim
	// Before the record says it ended, everything the end is counted in: budgets, the spend
	// ledger, the usage history and the metrics. A client that saw the end sees all of them.
	r.s.settleInfo(r.ri, r.ticket, ch)
	cost = r.s.settleBilling(r.ri)
	report()
	r.finish(status, final, rerr, output)
	usage := ch.Usage
	r.s.log.LogAttrs(context.Background(), slog.LevelInfo, "background response",
		slog.String("request_id", r.requestID), slog.String("team", r.team), slog.String("key", r.key),
		slog.String("model", printable(r.rec.Model, maxLoggedModel)), slog.String("status", status),
		slog.Duration("duration", time.Since(r.started)),
		slog.Int64("input_tokens", usage.InputTokens), slog.Int64("output_tokens", usage.OutputTokens),
		slog.String("upstream_error", r.upstreamErr))
}

// backgroundRoute names background jobs in metrics and logs.
const backgroundRoute = "/v1/responses (background)"

// httpStatus is how a job's end shows in request metrics: 200 for an answer (complete or
// not), 499 for a client's cancel, 503 for a shutdown, and the platform's status (502 when
// it gave none) for a failure.
func (r *bgRun) httpStatus(status string) int {
	switch {
	case status == stored.StatusCancelled:
		return statusClientClosedRequest
	case status != stored.StatusFailed:
		return http.StatusOK
	case errors.Is(context.Cause(r.job.ctx), errShutdown):
		return http.StatusServiceUnavailable
	case r.failStatus != 0:
		return r.failStatus
	}
	return http.StatusBadGateway
}

// heartbeat renews the job's claim while it runs, and stops the job when its record was
// cancelled through another replica.
func (r *bgRun) heartbeat() (stop func()) {
	every := r.s.bg.lease / 3
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
			if err := r.st.keeper.Claim(ctx, r.job.owner, r.job.id, r.s.bg.instance, r.s.bg.claimTTL()); err != nil {
				r.s.log.Warn("background response: claim not renewed", slog.String("request_id", r.requestID), slog.String("error", err.Error()))
			}
			// Cancelled or deleted through another replica: the platform call is not wanted.
			if cur, err := r.st.keeper.Get(ctx, r.job.owner, r.job.id); errors.Is(err, stored.ErrNotFound) || err == nil && cur.Status == stored.StatusCancelled {
				r.job.cancel(errCancelledByClient)
			}
			cancel()
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); wg.Wait() }) }
}

// call runs the platform call and says how it ended: the final status, the platform's
// response object when it sent one, the error to record otherwise, the output items seen so
// far, and the usage to settle.
func (r *bgRun) call() (status string, final []byte, rerr responseError, output []byte, ch accounting.Charge) {
	s, st := r.s, r.st
	resp, cancel, f := s.openGateway(r.job.ctx, st, r.p, r.ri, r.body, true)
	if f != nil {
		// Charged as a foreground call is: nothing when the request never reached the
		// platform or it refused it, the reservation when it may have billed.
		r.upstreamErr = f.Kind
		if f.MaybeBilled {
			ch = accounting.UpperBound(r.reserve, ratelimit.Usage{}, accounting.NoAnswer)
		}
		if f.ClientGone {
			return r.cutShort(), nil, r.cutError(), nil, ch
		}
		r.failStatus = f.Status
		e := gjson.GetManyBytes(f.Body, "error.code", "error.message")
		return stored.StatusFailed, nil, responseError{e[0].Str, e[1].Str}, nil, ch
	}
	defer cancel()
	defer resp.Body.Close()
	if !isEventStream(resp) {
		r.upstreamErr = "invalid_body"
		return stored.StatusFailed, nil, responseError{"server_error", "The platform returned an invalid response."}, nil,
			accounting.UpperBound(r.reserve, ratelimit.Usage{}, accounting.BadBody)
	}
	r.progress(stored.StatusInProgress)

	idle := newIdleTimer(st.cfg.Upstream.StreamIdleTimeout, cancel)
	defer idle.stop()
	events := newEventReader(&idleReader{r: resp.Body, idle: idle}, maxEventSize)
	defer events.release()
	sc := scanBackgroundStream(events, r.reserve.InputTokens)
	if sc.done {
		if sc.final == nil {
			r.upstreamErr = "stream_error"
		}
		// Read the upstream to its end (bounded) so its connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		if sc.reported {
			return sc.status, sc.final, sc.rerr, sc.output, accounting.Known(sc.usage)
		}
		// An error event, or a terminal one without usage: every event was read, but what
		// the platform billed for them it did not say.
		return sc.status, sc.final, sc.rerr, sc.output, accounting.UpperBound(r.reserve, sc.usage, accounting.StreamCut)
	}
	cancel()
	cut := accounting.UpperBound(r.reserve, sc.usage, accounting.StreamCut)
	switch {
	case r.job.ctx.Err() != nil:
		// Cancelled by its client or by a shutdown: modelgate's own cut.
		r.upstreamErr = "canceled"
		return r.cutShort(), nil, r.cutError(), sc.output, accounting.EarlyCut(r.reserve, sc.usage, accounting.EarlyEnd)
	case idle.fired.Load():
		r.upstreamErr = "stream_idle"
		return stored.StatusFailed, nil, responseError{"server_error", "The platform stopped sending events; the response was abandoned."}, sc.output, cut
	case sc.invalid:
		r.upstreamErr = "stream_invalid"
		return stored.StatusFailed, nil, responseError{"server_error", "The platform sent a malformed event; the response was abandoned."}, sc.output, cut
	}
	r.upstreamErr = streamEndKind(sc.readErr)
	return stored.StatusFailed, nil, responseError{"server_error", "The platform's stream ended before the response was complete."}, sc.output, cut
}

// backgroundStream is what a job read of the platform's event stream.
type backgroundStream struct {
	done     bool // a terminal or error event ended it: status, final and rerr say how
	status   string
	final    []byte // the terminal event's response object
	rerr     responseError
	output   []byte          // output items finished so far (JSON array), nil when none
	usage    ratelimit.Usage // the terminal event's, or the input estimate and the deltas seen
	reported bool            // usage is the platform's own figure
	invalid  bool            // the platform stopped speaking SSE or sent data that is not JSON
	readErr  error           // why reading stopped, when no event ended the stream
}

// scanBackgroundStream reads a Responses event stream to its end and says how it ended. It
// holds nothing of the events but the output items and the terminal response.
func scanBackgroundStream(events *eventReader, inputEstimate int64) (sc backgroundStream) {
	var deltas int64
	var items [][]byte
	defer func() {
		if sc.output == nil {
			sc.output = joinItems(items)
		}
		if sc.final == nil { // no terminal usage: a cut stream is charged what it streamed
			sc.usage = ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
		}
	}()
	for {
		ev, err := events.next()
		if err != nil {
			sc.readErr = err
			return sc
		}
		if ev.malformed || (ev.data != nil && translate.CheckJSON(ev.data) != translate.JSONValid) {
			sc.invalid = true
			return sc
		}
		if ev.data == nil {
			continue
		}
		typ := ev.typ
		if typ == "" {
			typ = gjson.GetBytes(ev.data, "type").Str
		}
		switch {
		case isCountedDelta(typ):
			deltas++
		case typ == "response.output_item.done":
			if it := gjson.GetBytes(ev.data, "item"); it.IsObject() {
				items = append(items, []byte(it.Raw))
			}
		case typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed":
			obj := gjson.GetBytes(ev.data, "response")
			if !obj.IsObject() {
				sc.invalid = true
				return sc
			}
			sc.done, sc.final = true, []byte(obj.Raw)
			sc.status = gjson.Get(obj.Raw, "status").Str
			if !knownFinal(sc.status) || sc.status == stored.StatusCancelled {
				switch typ {
				case "response.completed":
					sc.status = stored.StatusCompleted
				case "response.incomplete":
					sc.status = stored.StatusIncomplete
				default:
					sc.status = stored.StatusFailed
				}
			}
			sc.output = []byte{} // the response object carries its own output
			if sc.usage, sc.reported = terminalUsage(ev.data); !sc.reported {
				sc.usage = ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
			}
			return sc
		case typ == "error":
			e := gjson.GetManyBytes(ev.data, "code", "message", "error.code", "error.message")
			sc.done, sc.status = true, stored.StatusFailed
			sc.rerr = responseError{firstNonEmpty(e[0].Str, e[2].Str, "server_error"),
				firstNonEmpty(e[1].Str, e[3].Str, "The platform failed to complete the response.")}
			return sc
		}
	}
}

// cutShort is the status of a job its context ended: cancelled by the client, or failed by
// a shutdown.
func (r *bgRun) cutShort() string {
	if errors.Is(context.Cause(r.job.ctx), errShutdown) {
		return stored.StatusFailed
	}
	return stored.StatusCancelled
}

func (r *bgRun) cutError() responseError {
	if errors.Is(context.Cause(r.job.ctx), errShutdown) {
		return shutdownError
	}
	return responseError{}
}

func knownFinal(status string) bool {
	switch status {
	case stored.StatusCompleted, stored.StatusIncomplete, stored.StatusFailed, stored.StatusCancelled:
		return true
	}
	return false
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// joinItems is a JSON array of the output items seen; nil when there were none.
func joinItems(items [][]byte) []byte {
	if len(items) == 0 {
		return nil
	}
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// progress records that the job moved on (in_progress), unless it was cancelled meanwhile.
func (r *bgRun) progress(status string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	cur, err := r.st.keeper.Get(ctx, r.job.owner, r.job.id)
	if err != nil || !stored.Unfinished(cur.Status) {
		return
	}
	cur.Status = status
	cur.Response = objectWith(cur.Response, status, responseError{}, nil, 0)
	if err := r.st.keeper.Update(ctx, r.job.owner, cur); err != nil {
		r.s.log.Warn("background response: progress not recorded", slog.String("request_id", r.requestID), slog.String("error", err.Error()))
	}
}

// finish records how the job ended and drops its claim. A record cancelled meanwhile
// through another replica stays cancelled.
func (r *bgRun) finish(status string, final []byte, rerr responseError, output []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	k, owner, id := r.st.keeper, r.job.owner, r.job.id
	defer func() {
		if err := k.Release(ctx, owner, id); err != nil {
			r.s.log.Warn("background response: claim not released", slog.String("request_id", r.requestID), slog.String("error", err.Error()))
		}
	}()
	cur, err := k.Get(ctx, owner, id)
	if err != nil {
		if !errors.Is(err, stored.ErrNotFound) { // deleted meanwhile: nothing to record
			r.s.log.Error("background response: result not recorded", slog.String("request_id", r.requestID), slog.String("error", err.Error()))
		}
		return
	}
	if cur.Status == stored.StatusCancelled && status != stored.StatusCancelled {
		status, final, rerr = stored.StatusCancelled, nil, responseError{}
	}
	rec := &stored.Record{ID: id, Parent: cur.Parent, Status: status, Model: cur.Model, Input: cur.Input}
	now := r.s.now().Unix()
	if final != nil {
		// The platform's own object, under modelgate's id, the client's model name and the
		// time of the submission.
		obj, _ := sjson.SetBytes(final, "id", id)
		obj, _ = sjson.SetBytes(obj, "background", true)
		obj, _ = sjson.SetBytes(obj, "model", cur.Model)
		if at := gjson.GetBytes(cur.Response, "created_at"); at.Exists() {
			obj, _ = sjson.SetRawBytes(obj, "created_at", []byte(at.Raw)) // when the client submitted it
		}
		if cur.Parent != "" {
			obj, _ = sjson.SetBytes(obj, "previous_response_id", cur.Parent)
		}
		rec.Response = objectWith(obj, status, rerr, nil, now)
	} else {
		if output == nil {
			output = []byte("[]")
		}
		rec.Response = objectWith(cur.Response, status, rerr, output, now)
	}
	if err := k.Update(ctx, owner, rec); err != nil && !errors.Is(err, stored.ErrNotFound) {
		r.s.log.Error("background response: result not recorded", slog.String("request_id", r.requestID), slog.String("error", err.Error()))
	}
}

// checkOrphan looks at an unfinished record read by a client: when no live runner holds it
// (its claim expired, or it names a previous life of this process), it is marked failed and
// returned so. A record another live replica runs, or this instance, is returned as it is.
func (s *Server) checkOrphan(ctx context.Context, st *state, owner string, r *stored.Record) *stored.Record {
	if !stored.Unfinished(r.Status) || s.bg.lookup(owner, r.ID) != nil {
		return r
	}
	runner, err := st.keeper.Runner(ctx, owner, r.ID)
	if err != nil || (runner != "" && runner != s.bg.instance && !s.bg.exclusive) {
		return r
	}
	// Read again: a job of this instance may have finished between the two reads.
	cur, err := st.keeper.Get(ctx, owner, r.ID)
	if err != nil || !stored.Unfinished(cur.Status) || s.bg.lookup(owner, r.ID) != nil {
		if err == nil {
			return cur
		}
		return r
	}
	endRecord(cur, stored.StatusFailed, restartError, s.now().Unix())
	if err := st.keeper.Update(ctx, owner, cur); err != nil {
		s.log.Warn("background response: orphan not marked failed", slog.String("error", err.Error()))
	}
	_ = st.keeper.Release(ctx, owner, r.ID)
	return cur
}

// cancelResponse answers POST /v1/responses/{id}/cancel: a running background response is
// stopped (its platform call ended) and answered cancelled; a finished one is answered as it
// is, as OpenAI does (cancelling is idempotent). Only background responses can be cancelled.
func (s *Server) cancelResponse(c *gin.Context) {
	r, ok := s.keptRecord(c, "/v1/responses/{id}/cancel")
	if !ok {
		return
	}
	st := requestState(c)
	who := owner(st, principal(c))
	if !gjson.GetBytes(r.Response, "background").Bool() {
		abortOpenAI(c, http.StatusBadRequest, typeInvalidRequest, "invalid_request", "",
			"Only responses created with background=true can be cancelled.")
		return
	}
	if stored.Unfinished(r.Status) {
		if j := s.bg.lookup(who, r.ID); j != nil {
			j.cancel(errCancelledByClient)
			select {
			case <-j.done:
			case <-time.After(cancelWait):
			case <-c.Request.Context().Done():
				return
			}
		} else {
			// Another replica runs it: the record says cancelled now, and its runner stops the
			// platform call at its next heartbeat.
			ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
			endRecord(r, stored.StatusCancelled, responseError{}, s.now().Unix())
			err := st.keeper.Update(ctx, who, r)
			cancel()
			if err != nil && !errors.Is(err, stored.ErrNotFound) {
				storeUnavailable(c, err)
				return
			}
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
		cur, err := st.keeper.Get(ctx, who, r.ID)
		cancel()
		switch {
		case errors.Is(err, stored.ErrNotFound):
			responseNotFound(c, r.ID)
			return
		case err != nil:
			storeUnavailable(c, err)
			return
		}
		r = cur
	}
	writeResponseObject(c, r)
}

// exclusiveStore reports whether the record store is this process's alone.
func exclusiveStore(st store.Store) bool {
	_, ok := st.(*store.Bolt)
	return ok
}

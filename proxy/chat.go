package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/reqlog"
	"modelgate/translate"
	"modelgate/upstream"
)

// chatCall is one Chat Completions request on its way through the gateway.
type chatCall struct {
	chatDialect // the parsed request and whether the upstream is asked to stream
	s           *Server
	c           *gin.Context
	st          *state
	p           *auth.Principal
	ri          *requestInfo
	upBody      []byte
	meta        translate.Meta
	estimate    int64 // input tokens estimate of one upstream call
	// reserve is one choice's reservation: its input estimate and output cap.
	reserve ratelimit.Usage
	gc      gatewayCall // its way to the platform, fallbacks included; kept here, not allocated apart
	// resps and cancels are the platform's answers, one per choice, and their cancels, once
	// openAll opened them all.
	resps   []*http.Response
	cancels []context.CancelFunc
	charge  accounting.Charge // what the call cost, settled when the handler returns
}

// chatCompletions serves POST /v1/chat/completions on top of the Responses gateway. Nothing
// is written to the client before the platform accepted the request, so its 4xx, 429 and 5xx
// answers keep their status and headers.
//
// Its frame stays under a stream for minutes, so all that is checked and built before the
// call is done in the preflight, whose frame is gone by then (see startStream).
func (s *Server) chatCompletions(c *gin.Context) {
	call := new(chatCall) // the dialect the preflight fills, and the call once admitted
	a := s.preflight(c, "/v1/chat/completions", call)
	if a == nil {
		return
	}
	call.admitted(s, c, a)
	defer func() { s.settle(info(c), a.ticket, call.charge) }()
	if call.ri.Stream {
		call.stream(&call.charge)
		return
	}
	call.complete(&call.charge)
}

// admitted makes the checked request the call on its way to the platform. Out of line, so
// the Meta it builds takes no room in the handler's frame under a stream.
//
//go:noinline
func (cc *chatCall) admitted(s *Server, c *gin.Context, a *admission) {
	req := cc.req
	cc.s, cc.c, cc.st, cc.p, cc.ri = s, c, a.st, a.p, info(c)
	cc.upBody, cc.estimate, cc.reserve = a.call.upBody, a.estimate, a.reserve
	cc.meta = translate.Meta{
		ID: "chatcmpl-" + newRequestID()[4:], Created: time.Now().Unix(), Model: req.Model,
		ReasoningField: a.st.cfg.Translate.ReasoningField,
		IncludeUsage:   req.IncludeUsage, Legacy: req.Legacy, Logprobs: req.Logprobs, Stop: req.Stop,
	}
}

// tooManyChoices refuses a fan-out above translate.max_n: each choice is a whole upstream
// call, so the fan-out is bounded here, not upstream. Out of line: its message would
// otherwise take room in the parse's caller (TestOpenStreamStack).
//
//go:noinline
func tooManyChoices(c *gin.Context, maxN int) {
	abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "n",
		"Invalid value for 'n': this gateway allows at most "+strconv.Itoa(maxN)+" choices per request (translate.max_n).")
}

// chatDialect is Chat Completions' part of the preflight.
type chatDialect struct {
	req      *translate.ChatRequest
	upStream bool      // the platform is asked for a stream
	sticky   stickyKey // the user or conversation a sticky model places it by
}

func (d *chatDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	req, err := translate.ParseChatWith(body, parseOptions(st)) // the body's last use: the parse's copy replaces it
	if err != nil {
		writeTranslateError(c, err)
		return false
	}
	return d.checkParsed(c, st, req, call)
}

// checkParsed is check's half after the parse, out of line: its locals (the model's
// resolution, the call's fields) would otherwise take room in the frame the parse runs
// under, the deepest point before a stream opens (TestOpenStreamStack).
//
//go:noinline
func (d *chatDialect) checkParsed(c *gin.Context, st *state, req *translate.ChatRequest, call *modelCall) bool {
	noteDroppedTools(c, req.DroppedTools)
	if maxN := maxChoices(st.cfg); req.N > maxN {
		tooManyChoices(c, maxN)
		return false
	}
	if !attributeIdentity(c, st, &req.Identity) {
		return false
	}
	d.req = req
	model, ok := st.models.resolve(req.Model)
	d.sticky = st.models.withSession(model, st.models.identityKey(model, &req.Identity), c.Request.Header, "")
	*call = modelCall{model: model, asked: req.Model, unknown: !ok, stream: req.Stream, maxOut: req.MaxOutputTokens, choices: req.N}
	return true
}

func (d *chatDialect) prepare(c *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	var opts translate.RequestOptions
	d.upStream, opts = translatedUpstream(st, d.req.Stream, len(d.req.Stop) > 0)
	st.routeCall(call, p, d.sticky) // one choice for all n choices
	upBody, err := d.req.ToResponses(call.upstream, opts)
	if err != nil {
		writeTranslateError(c, err)
		return false
	}
	call.upBody = upBody
	return true
}

// maxChoices is translate.max_n, or its default for a config built in code without it.
func maxChoices(cfg *config.Config) int {
	if cfg.Translate.MaxN > 0 {
		return cfg.Translate.MaxN
	}
	return config.DefaultMaxN
}

func writeTranslateError(c *gin.Context, err error) {
	var te *translate.Error
	if !errors.As(err, &te) {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_request", "", "The request could not be translated.")
		return
	}
	status := te.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	typ := te.Type
	if typ == "" {
		typ = typeInvalidRequest
	}
	abortError(c, status, typ, te.Code, te.Param, te.Message)
}

// openAll opens one upstream call per choice, in parallel, and leaves the answers in
// cc.resps and cc.cancels. If any fails, the first failure is returned, and failed is set
// to the charge for every choice: the platform may have billed those that it answered, and
// those whose request it received before the call broke.
//
// The choices fall back together (docs/routing.md): when one fails in a way a fallback may
// help with, all of them are abandoned, charged, and opened again on the next model, so one
// answer never mixes models.
//
// The frames between the handler and the transport's wait for the platform's headers are
// the deepest a stream's stack goes (TestStreamHeaderWaitDepth): a single choice goes from
// here straight to openGateway, and the fan-out's slices, goroutines and loop are in frames
// of their own. (A charge returned by value would take room in each frame it passes.)
func (cc *chatCall) openAll(ctx context.Context, failed *accounting.Charge) *upstream.Failure {
	gc := &cc.gc
	gc.start(cc.st, cc.p, cc.ri, cc.upBody, cc.upStream, &cc.reserve, int64(cc.req.N), cc.c.Writer.Header())
	if cc.req.N > 1 {
		return cc.openFanout(ctx, gc, failed)
	}
	// A single choice takes the request's whole fallback chain in openGateway.
	resp, cancel, f := cc.s.openGateway(ctx, gc)
	if f != nil {
		chargeFailed(failed, f, cc.reserve) // as Responses and Messages charge theirs
		return f
	}
	cc.resps, cc.cancels = []*http.Response{resp}, []context.CancelFunc{cancel}
	return nil
}

// openFanout is openAll for n>1 choices: each attempt on gc's current model opens them all,
// and they move down the fallbacks together.
//
//go:noinline
func (cc *chatCall) openFanout(ctx context.Context, gc *gatewayCall, failed *accounting.Charge) *upstream.Failure {
	for {
		f, ch := cc.openChoices(ctx, gc)
		if f == nil || !cc.s.fallBack(gc, f, ch) {
			if f != nil && f.Settled {
				ch = accounting.Charge{} // billed by the chain when it moved past it
			}
			*failed = ch
			return f
		}
	}
}

// openChoices is one attempt of openFanout on gc's current model: on success the answers
// are in cc.resps and cc.cancels.
func (cc *chatCall) openChoices(ctx context.Context, gc *gatewayCall) (*upstream.Failure, accounting.Charge) {
	n := cc.req.N
	resps := make([]*http.Response, n)
	cancels := make([]context.CancelFunc, n)
	fails := make([]*upstream.Failure, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ri := &requestInfo{Record: reqlog.Record{RequestID: cc.ri.RequestID}, trace: cc.ri.trace}
			resps[i], cancels[i], fails[i] = cc.s.openOnce(ctx, gc, ri)
		})
	}
	wg.Wait()
	cc.ri.Attempts = n
	var first *upstream.Failure
	for _, f := range fails {
		if f != nil {
			first = f
			break
		}
	}
	if first == nil {
		cc.resps, cc.cancels = resps, cancels
		return nil, accounting.Charge{}
	}
	// The answered choices are drained side by side, so the failure's answer waits for one
	// drain at most, not one per choice.
	charges := make([]accounting.Charge, n)
	for i := range n {
		if fails[i] != nil {
			charges[i] = fails[i].Charge(cc.reserve)
			continue
		}
		wg.Go(func() { charges[i] = cc.abandon(resps[i], cancels[i]) })
	}
	wg.Wait()
	var ch accounting.Charge
	for _, c := range charges {
		ch = ch.Plus(c)
	}
	return first, ch
}

// abandon closes a choice the platform answered while another choice of the request failed,
// and returns what the platform billed for it. A non-stream answer was produced and billed
// before its headers came, so it is read for its usage (it is already there, and reading it
// costs the platform nothing). A stream is read on, forwarding nothing, to its terminal
// event's usage within the bounded drain (relay.DrainAbandoned); only a stream that does not
// finish in time is charged its reservation, since it may have run on for as long as the
// slowest sibling took to fail.
func (cc *chatCall) abandon(resp *http.Response, cancel context.CancelFunc) accounting.Charge {
	defer cancel()
	defer resp.Body.Close()
	if cc.upStream {
		e := accounting.Ending{How: accounting.FanoutAbandoned}
		e.Read, e.Reported = relay.DrainAbandoned(resp.Body, cancel)
		return accounting.ChargeFor(cc.reserve, e)
	}
	buf := relay.GetAnswerBuf(resp.ContentLength)
	defer relay.PutAnswerBuf(buf)
	var u ratelimit.Usage
	reported := false
	if relay.ReadAnswer(buf, resp.Body, nil) == nil {
		u, reported = relay.ResponseUsage(buf.Bytes())
	}
	return accounting.ForAnswer(cc.reserve, u, reported)
}

func closeAll(resps []*http.Response, cancels []context.CancelFunc) {
	for i := range resps {
		if cancels[i] != nil {
			cancels[i]()
		}
		if resps[i] != nil {
			resps[i].Body.Close()
		}
	}
}

// complete serves a non-stream client: one chat.completion with n choices. ch is set to
// what the platform billed.
func (cc *chatCall) complete(ch *accounting.Charge) {
	ctx := cc.c.Request.Context()
	if cc.upStream {
		// Served from an upstream stream to a client waiting for one answer: the whole call
		// is bounded like any non-stream call, not only by the idle timer.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, cc.st.cfg.Upstream.RequestTimeout)
		defer stop()
	}
	if f := cc.openAll(ctx, ch); f != nil {
		writeFailure(cc.c, f)
		return
	}
	defer cc.closeOpened()
	resps, cancels := cc.resps, cc.cancels
	n := len(resps)
	answers := make([][]byte, n)
	charges := make([]accounting.Charge, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		meta := cc.meta
		meta.ChoiceIndex = i
		work := func() {
			answers[i], charges[i], errs[i] = cc.completeOne(ctx, resps[i], cancels[i], meta)
		}
		if n == 1 {
			work()
		} else {
			wg.Go(work)
		}
	}
	wg.Wait()
	var total accounting.Charge
	for _, c := range charges {
		total = total.Plus(c)
	}
	*ch = total
	for _, err := range errs {
		if err != nil {
			cc.answerError(err)
			return
		}
	}
	out := answers[0]
	if n > 1 {
		var err error
		if out, err = translate.MergeChoices(answers); err != nil {
			cc.answerError(err)
			return
		}
	}
	cc.c.Data(http.StatusOK, "application/json", out)
}

// completeOne turns one upstream answer into one chat.completion, and says what the
// platform billed for it.
func (cc *chatCall) completeOne(ctx context.Context, resp *http.Response, cancel context.CancelFunc, meta translate.Meta) ([]byte, accounting.Charge, error) {
	if !cc.upStream {
		var buf bytes.Buffer
		if err := relay.ReadAnswer(&buf, resp.Body, cc.ri.waitClock()); err != nil {
			return nil, accounting.ForAnswer(cc.reserve, ratelimit.Usage{}, false), err
		}
		cc.ri.traceAnswer(buf.Bytes())
		out, usage, err := translate.ResponseToChat(buf.Bytes(), meta)
		return out, accounting.ForAnswer(cc.reserve, relay.UsageOf(usage), usage.Reported), err
	}
	agg := translate.NewAggregator(meta)
	agg.SetInputEstimate(cc.estimate)
	a := relay.NewAggregate(resp.Body, cc.st.cfg.Upstream.StreamIdleTimeout, cancel, cc.ri, cc.ri.waitClock())
	defer a.Close()
	a.Read(agg.Feed)
	out, usage, err := agg.Result()
	ch := a.Charge(cc.c.Request.Context(), cancel, cc.reserve, usage)
	if !a.Finished() && err != nil {
		// Cut short by modelgate, not by the platform: say why, so the client gets a 504
		// for a timeout and nothing at all when it left.
		switch {
		case a.IdleFired():
			err = fmt.Errorf("upstream stream idle: %w", context.DeadlineExceeded)
		case ctx.Err() != nil:
			err = ctx.Err()
		}
	}
	return out, ch, err
}

// answerError relays a failure found after the platform answered 2xx (failed response,
// invalid body) before anything was written to the client.
func (cc *chatCall) answerError(err error) {
	var te *translate.Error
	if errors.As(err, &te) {
		writeTranslateError(cc.c, err)
		return
	}
	cc.s.answerFailed(cc.c, err)
}

// stream serves a streaming client. Each choice's upstream stream has its own converter;
// their chunks are interleaved as they come, then one usage chunk and one [DONE] close the
// stream when there are several choices (a single converter writes its own trailer). ch is
// set to what the platform billed.
func (cc *chatCall) stream(ch *accounting.Charge) {
	if f := cc.openAll(cc.c.Request.Context(), ch); f != nil {
		writeFailure(cc.c, f)
		return
	}
	defer cc.closeOpened()
	// The platform has the request: a stream that runs for minutes need not hold it.
	cc.req, cc.upBody, cc.gc.body = nil, nil, nil
	cc.ri.held.Release()
	startStream(cc.c) // from this frame, above the relay's (see startStream)
	cc.relayStream(ch)
}

// closeOpened closes the choices openAll opened.
func (cc *chatCall) closeOpened() { closeAll(cc.resps, cc.cancels) }

// relayStream pumps the opened choices, whose stream has started, to the client and sets
// ch to what the platform billed. Out of line: the pump in its frame would otherwise sit
// under the wait for the platform's headers and under the stream's start too.
//
//go:noinline
func (cc *chatCall) relayStream(ch *accounting.Charge) {
	c, resps, cancels := cc.c, cc.resps, cc.cancels
	p := relay.Pump{Out: relay.NewWriter(c.Writer, cc.st.cfg.Upstream.KeepAliveInterval), Obs: cc.ri,
		Client: c.Request.Context(), Idle: cc.st.cfg.Upstream.StreamIdleTimeout, Reserve: cc.reserve}
	defer p.Out.Stop()
	if cc.s.hooks.StreamOpened != nil {
		cc.s.hooks.StreamOpened(cc.ri.Route)
		defer cc.s.hooks.StreamClosed(cc.ri.Route)
	}
	if len(resps) == 1 {
		*ch = p.Direct(resps[0].Body, cancels[0], cc.newConverter(0, 1))
		return
	}
	*ch = cc.streamMerged(p, resps, cancels)
}

// newConverter makes choice i's stream converter, in a call of its own so the Meta it copies
// is not in stream's frame.
//
//go:noinline
func (cc *chatCall) newConverter(i, n int) *translate.StreamConverter {
	meta := cc.meta
	meta.ChoiceIndex = i
	meta.OmitTrailer = n > 1
	conv := translate.NewStreamConverter(meta)
	conv.SetInputEstimate(cc.estimate)
	return conv
}

// streamMerged relays n>1 choices side by side and returns what to charge for all of them.
// It takes its own copy of the pump: the choices' goroutines share it, which puts it on the
// heap, and only this rarer path should pay for that.
//
//go:noinline
func (cc *chatCall) streamMerged(p relay.Pump, resps []*http.Response, cancels []context.CancelFunc) accounting.Charge {
	convs := make([]*translate.StreamConverter, len(resps))
	bodies := make([]io.Reader, len(resps))
	for i := range convs {
		convs[i] = cc.newConverter(i, len(resps))
		bodies[i] = resps[i].Body
	}
	return p.Merged(bodies, cancels, convs, cc.meta)
}

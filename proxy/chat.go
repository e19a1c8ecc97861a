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
	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/translate"
	"modelgate/upstream"
)

// chatCall is one Chat Completions request on its way through the gateway.
type chatCall struct {
	s        *Server
	c        *gin.Context
	st       *state
	p        *auth.Principal
	ri       *requestInfo
	req      *translate.ChatRequest
	upBody   []byte
	meta     translate.Meta
	estimate int64         // input tokens estimate of one upstream call
	upStream bool          // the upstream is asked to stream
	sw       *streamWriter // the client stream, once started
	// reserve is one choice's reservation: its input estimate and output cap.
	reserve ratelimit.Usage
}

// chatCompletions serves POST /v1/chat/completions on top of the Responses gateway. Nothing
// is written to the client before the platform accepted the request, so its 4xx, 429 and 5xx
// answers keep their status and headers.
//
// Its frame stays under a stream for minutes, so all that is checked and built before the
// call is done in the preflight, whose frame is gone by then (see startStream).
func (s *Server) chatCompletions(c *gin.Context) {
	d := &chatDialect{}
	a := s.preflight(c, "/v1/chat/completions", d)
	if a == nil {
		return
	}
	call := d.newCall(s, c, a)
	var ch accounting.Charge
	defer func() { s.settle(c, a.ticket, ch) }()
	if call.ri.stream {
		ch = call.stream()
		return
	}
	ch = call.complete()
}

// newCall is an admitted chat request on its way to the platform.
//
//go:noinline
func (d *chatDialect) newCall(s *Server, c *gin.Context, a *admission) *chatCall {
	req := d.req
	return &chatCall{
		s: s, c: c, st: a.st, p: a.p, ri: info(c), req: req, upBody: a.call.upBody, upStream: d.upStream,
		estimate: a.estimate, reserve: a.reserve,
		meta: translate.Meta{
			ID: "chatcmpl-" + newRequestID()[4:], Created: time.Now().Unix(), Model: req.Model,
			ReasoningField: a.st.cfg.Translate.ReasoningField,
			IncludeUsage:   req.IncludeUsage, Legacy: req.Legacy, Logprobs: req.Logprobs, Stop: req.Stop,
		},
	}
}

// tooManyChoices refuses a fan-out above translate.max_n: each choice is a whole upstream
// call, so the fan-out is bounded here, not upstream. Out of line: its message would
// otherwise take room in the parse's caller (TestOpenStreamStack).
//
//go:noinline
func tooManyChoices(c *gin.Context, maxN int) {
	abortOpenAI(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "n",
		"Invalid value for 'n': this gateway allows at most "+strconv.Itoa(maxN)+" choices per request (translate.max_n).")
}

// chatDialect is Chat Completions' part of the preflight.
type chatDialect struct {
	req      *translate.ChatRequest
	upStream bool // the platform is asked for a stream
}

func (d *chatDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	req, err := translate.ParseChat(body)
	if err != nil {
		writeTranslateError(c, err)
		return false
	}
	if maxN := maxChoices(st.cfg); req.N > maxN {
		tooManyChoices(c, maxN)
		return false
	}
	d.req = req
	*call = modelCall{model: req.Model, stream: req.Stream, maxOut: req.MaxOutputTokens, choices: req.N}
	return true
}

func (d *chatDialect) prepare(c *gin.Context, st *state, _ *auth.Principal, call *modelCall) bool {
	// A non-stream client with stop sequences is served from an upstream stream, so the
	// upstream can be ended as soon as a stop sequence appears.
	d.upStream = d.req.Stream || len(d.req.Stop) > 0
	upBody, err := d.req.ToResponses(st.models.upstreamName(d.req.Model), translate.RequestOptions{
		DropExtraFields: st.cfg.Translate.DropExtraFields,
		ForceStream:     d.upStream && !d.req.Stream,
	})
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
		abortOpenAI(c, http.StatusBadRequest, typeInvalidRequest, "invalid_request", "", "The request could not be translated.")
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
	abortOpenAI(c, status, typ, te.Code, te.Param, te.Message)
}

func toUsage(u translate.Usage) ratelimit.Usage {
	return ratelimit.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedInputTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens}
}

// sumUsage adds up the usage of the n choices of one request.
func sumUsage(us []translate.Usage) translate.Usage {
	var total translate.Usage
	for _, u := range us {
		total.InputTokens += u.InputTokens
		total.OutputTokens += u.OutputTokens
		total.TotalTokens += u.TotalTokens
		total.CachedTokens += u.CachedTokens
		total.ReasoningTokens += u.ReasoningTokens
		total.CacheWriteTokens += u.CacheWriteTokens
		total.HasCacheWrite = total.HasCacheWrite || u.HasCacheWrite
	}
	return total
}

func usagesOf(convs []*translate.StreamConverter) []translate.Usage {
	us := make([]translate.Usage, len(convs))
	for i, conv := range convs {
		us[i] = conv.Usage()
	}
	return us
}

// openAll opens one upstream call per choice, in parallel. If any fails, the first failure
// is returned along with the charge for every choice: the platform may have billed those
// that it answered, and those whose request it received before the call broke.
func (cc *chatCall) openAll(ctx context.Context) ([]*http.Response, []context.CancelFunc, *upstream.Failure, accounting.Charge) {
	n := cc.req.N
	resps := make([]*http.Response, n)
	cancels := make([]context.CancelFunc, n)
	fails := make([]*upstream.Failure, n)
	if n == 1 {
		resps[0], cancels[0], fails[0] = cc.s.openGateway(ctx, cc.st, cc.p, cc.ri, cc.upBody, cc.upStream)
	} else {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ri := &requestInfo{requestID: cc.ri.requestID, trace: cc.ri.trace}
				resps[i], cancels[i], fails[i] = cc.s.openGateway(ctx, cc.st, cc.p, ri, cc.upBody, cc.upStream)
			})
		}
		wg.Wait()
		cc.ri.attempts = n
	}
	var first *upstream.Failure
	for _, f := range fails {
		if f != nil {
			first = f
			break
		}
	}
	if first == nil {
		return resps, cancels, nil, accounting.Charge{}
	}
	var ch accounting.Charge
	for i := range n {
		switch {
		case fails[i] != nil && fails[i].MaybeBilled:
			ch = ch.Plus(accounting.UpperBound(cc.reserve, ratelimit.Usage{}, accounting.NoAnswer))
		case fails[i] != nil:
			// Refused by the platform, or never sent: nothing billed.
		default:
			ch = ch.Plus(cc.abandon(resps[i], cancels[i]))
		}
	}
	return nil, nil, first, ch
}

// abandon closes a choice the platform answered while another choice of the request failed,
// and returns what the platform billed for it. A non-stream answer was produced and billed
// before its headers came, so it is read for its usage (it is already there, and reading it
// costs the platform nothing); a stream is ended at once and charged its reservation, since
// it ran for as long as the slowest sibling took to fail.
func (cc *chatCall) abandon(resp *http.Response, cancel context.CancelFunc) accounting.Charge {
	defer cancel()
	defer resp.Body.Close()
	if cc.upStream {
		return accounting.UpperBound(cc.reserve, ratelimit.Usage{}, accounting.FanoutCut)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxUpstreamJSON+1)); err == nil {
		if u := gjson.GetBytes(buf.Bytes(), "usage"); u.IsObject() {
			f := gjson.GetMany(u.Raw, "input_tokens", "output_tokens", "input_tokens_details.cached_tokens", "output_tokens_details.reasoning_tokens")
			return accounting.Known(ratelimit.Usage{InputTokens: f[0].Int(), OutputTokens: f[1].Int(), CachedInputTokens: f[2].Int(), ReasoningTokens: f[3].Int()})
		}
	}
	return accounting.UpperBound(cc.reserve, ratelimit.Usage{}, accounting.BadBody)
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

// complete serves a non-stream client: one chat.completion with n choices.
func (cc *chatCall) complete() accounting.Charge {
	ctx := cc.c.Request.Context()
	if cc.upStream {
		// Served from an upstream stream to a client waiting for one answer: the whole call
		// is bounded like any non-stream call, not only by the idle timer.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, cc.st.cfg.Upstream.RequestTimeout)
		defer stop()
	}
	resps, cancels, f, failed := cc.openAll(ctx)
	if f != nil {
		writeFailure(cc.c, f)
		return failed
	}
	defer closeAll(resps, cancels)
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
	for _, ch := range charges {
		total = total.Plus(ch)
	}
	for _, err := range errs {
		if err != nil {
			cc.answerError(err)
			return total
		}
	}
	out := answers[0]
	if n > 1 {
		var err error
		if out, err = translate.MergeChoices(answers); err != nil {
			cc.answerError(err)
			return total
		}
	}
	cc.c.Data(http.StatusOK, "application/json", out)
	return total
}

// completeOne turns one upstream answer into one chat.completion, and says what the
// platform billed for it.
func (cc *chatCall) completeOne(ctx context.Context, resp *http.Response, cancel context.CancelFunc, meta translate.Meta) ([]byte, accounting.Charge, error) {
	if !cc.upStream {
		var buf bytes.Buffer
		if _, err := timedRead(cc.ri, cc.ri.keepWait, &buf, io.LimitReader(resp.Body, maxUpstreamJSON+1)); err != nil {
			return nil, accounting.UpperBound(cc.reserve, ratelimit.Usage{}, accounting.BadBody), err
		}
		if buf.Len() > maxUpstreamJSON || !translate.ValidJSON(buf.Bytes()) {
			return nil, accounting.UpperBound(cc.reserve, ratelimit.Usage{}, accounting.BadBody), errInvalidUpstream
		}
		cc.ri.traceAnswer(buf.Bytes())
		out, usage, err := translate.ResponseToChat(buf.Bytes(), meta)
		if !usage.Reported {
			return out, accounting.UpperBound(cc.reserve, toUsage(usage), accounting.BadBody), err
		}
		return out, accounting.Known(toUsage(usage)), err
	}
	agg := translate.NewAggregator(meta)
	agg.SetInputEstimate(cc.estimate)
	a := newStreamAggregate(cc.ri, cc.st, resp, cancel)
	defer a.close()
	a.read(cc.ri, agg.Feed)
	out, usage, err := agg.Result()
	ch := a.charge(cc.c, cancel, cc.reserve, usage)
	if !a.finished && err != nil {
		// Cut short by modelgate, not by the platform: say why, so the client gets a 504
		// for a timeout and nothing at all when it left.
		switch {
		case a.idle.fired.Load():
			err = fmt.Errorf("upstream stream idle: %w", context.DeadlineExceeded)
		case ctx.Err() != nil:
			err = ctx.Err()
		}
	}
	return out, ch, err
}

var errInvalidUpstream = errors.New("invalid upstream answer")

// answerError relays a failure found after the platform answered 2xx (failed response,
// invalid body) before anything was written to the client.
func (cc *chatCall) answerError(err error) {
	var te *translate.Error
	if errors.As(err, &te) {
		writeTranslateError(cc.c, err)
		return
	}
	if errors.Is(err, errInvalidUpstream) {
		cc.ri.upstreamErr = "invalid_body"
		abortOpenAI(cc.c, http.StatusBadGateway, typeServer, "upstream_invalid_response", "", "The platform returned an invalid response.")
		return
	}
	cc.s.upstreamFailed(cc.c, err)
}

// idleReader ends the upstream call (through the idle timer) when no bytes arrive for too long.
type idleReader struct {
	r    io.Reader
	idle *idleTimer
	wait *requestInfo // when set, time spent reading counts as upstream wait
}

func (r *idleReader) Read(p []byte) (int, error) {
	if r.wait != nil {
		t0 := monoNow()
		defer func() { r.wait.upstreamWait.Add(monoNow() - t0) }()
	}
	r.idle.beginWait()
	n, err := r.r.Read(p)
	r.idle.endWait()
	return n, err
}

// chunkMsg is converted output of one choice on its way to the client.
type chunkMsg struct {
	out  []byte
	buf  *[]byte // the pooled buffer out lies in, returned once out is written; may be nil
	last bool    // the choice is finished
}

// stream serves a streaming client. Each choice's upstream stream has its own converter;
// their chunks are interleaved as they come, then one usage chunk and one [DONE] close the
// stream when there are several choices (a single converter writes its own trailer).
func (cc *chatCall) stream() accounting.Charge {
	c := cc.c
	resps, cancels, f, failed := cc.openAll(c.Request.Context())
	if f != nil {
		writeFailure(c, f)
		return failed
	}
	defer closeAll(resps, cancels)
	// The platform has the request: a stream that runs for minutes need not hold it.
	cc.req, cc.upBody = nil, nil
	startStream(c)
	cc.sw = newStreamWriter(c.Writer, cc.st.cfg.Upstream.KeepAliveInterval)
	defer cc.sw.stop()
	if cc.s.hooks.StreamOpened != nil {
		cc.s.hooks.StreamOpened(cc.ri.route)
		defer cc.s.hooks.StreamClosed(cc.ri.route)
	}
	if len(resps) == 1 {
		return cc.pumpDirect(resps[0], cancels[0], cc.newConverter(0, 1))
	}
	return cc.streamMerged(resps, cancels)
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
//
//go:noinline
func (cc *chatCall) streamMerged(resps []*http.Response, cancels []context.CancelFunc) accounting.Charge {
	convs := make([]*translate.StreamConverter, len(resps))
	for i := range convs {
		convs[i] = cc.newConverter(i, len(resps))
	}
	cc.pumpMerged(resps, cancels, convs)
	var total accounting.Charge
	for _, conv := range convs {
		u := conv.Usage()
		if u.Reported {
			total = total.Plus(accounting.Known(toUsage(u)))
			continue
		}
		// Cut by the platform, or by modelgate while the choices run side by side (the
		// client left, a sibling failed, a stop sequence): the reservation. Several
		// streams are not drained after a cut; n>1 streams with a cut are rare.
		total = total.Plus(accounting.UpperBound(cc.reserve, toUsage(u), accounting.StreamCut))
	}
	return total
}

// write sends converted bytes to the client and flushes. false means the client is gone.
func (cc *chatCall) write(out []byte) bool { return cc.send(out, true) }

// queue is write without the flush, for a relay that flushes before it waits.
func (cc *chatCall) queue(out []byte) bool { return cc.send(out, false) }

func (cc *chatCall) send(out []byte, flush bool) bool {
	if len(out) == 0 {
		return true
	}
	if cc.ri.ttfb == 0 {
		cc.ri.ttfb = time.Since(cc.ri.start)
	}
	if cc.sw.send(out, flush) != nil {
		cc.ri.clientGone = true
		return false
	}
	cc.ri.traceSent()
	return true
}

// eventConverter is what the single-choice relay feeds: the chat converter, or the Messages
// one, which borrows this relay so both dialects stream and settle the same way.
type eventConverter interface {
	FeedWith(s *translate.Scratch, dst []byte, eventType string, data []byte) ([]byte, bool)
	End(err error) []byte
	Usage() translate.Usage
}

// pumpDirect converts one upstream stream on the handler's goroutine: the common case, with
// no channel hop between upstream read and client write. Converted chunks are queued and
// flushed whenever the relay is about to wait for the platform (see streamWriter).
//
// It returns what to charge. Each event is converted, and so counted, before it is written;
// a stream modelgate ends itself (the client left, a stop sequence) is drained of what is in
// flight first (see drainAfterCut).
func (cc *chatCall) pumpDirect(resp *http.Response, cancel context.CancelFunc, conv eventConverter) accounting.Charge {
	idle := newIdleTimer(cc.st.cfg.Upstream.StreamIdleTimeout, cancel)
	defer idle.stop()
	events := newEventReader(&idleReader{r: resp.Body, idle: idle}, maxEventSize)
	defer events.release()
	events.beforeWait = cc.sw.flush
	defer cc.sw.flush()
	var readErr error
	for {
		ev, err := events.next()
		if err != nil {
			readErr = chatReadErr(err)
			break
		}
		if ev.typ == "" && ev.data == nil {
			continue // a comment or a stray blank line: nothing to convert
		}
		cc.ri.traceEvent(ev.typ, ev.data)
		buf, out, done := feedPooled(conv, ev.typ, ev.data)
		sent := cc.queue(out) // the writer has copied out when queue returns
		putChunkBuf(buf, out)
		if !sent || done {
			// The client left, or a stop sequence or the terminal event ended the answer:
			// nothing more is needed upstream.
			cc.sw.flush()
			return cc.cutCharge(events, cancel, conv)
		}
	}
	cancel()
	return cc.endCharge(readErr, idle, conv)
}

// endCharge ends a stream that stopped without modelgate cutting it (the platform ended or
// broke it, or the client left while modelgate waited for the platform) and returns what to
// charge for it. A call of its own so the relay loop's frame stays small.
//
//go:noinline
func (cc *chatCall) endCharge(readErr error, idle *idleTimer, conv eventConverter) accounting.Charge {
	u := conv.Usage()
	if cc.c.Request.Context().Err() != nil {
		cc.ri.clientGone = true
		if u.Reported {
			return accounting.Known(toUsage(u))
		}
		return accounting.EarlyCut(cc.reserve, toUsage(u), accounting.EarlyEnd)
	}
	cc.noteStreamEnd(readErr, idle)
	cc.write(conv.End(readErr))
	if u.Reported {
		return accounting.Known(toUsage(u))
	}
	return accounting.UpperBound(cc.reserve, toUsage(u), accounting.StreamCut)
}

// cutCharge ends a stream modelgate stopped relaying (the client left, a stop sequence, or
// the terminal event) and returns what to charge for it.
//
//go:noinline
func (cc *chatCall) cutCharge(events *eventReader, cancel context.CancelFunc, conv eventConverter) accounting.Charge {
	u := conv.Usage()
	if u.Reported {
		cancel()
		return accounting.Known(toUsage(u))
	}
	read, reported := drainAfterCut(events, cancel, toUsage(u))
	if reported {
		return accounting.Known(read)
	}
	return accounting.EarlyCut(cc.reserve, read, accounting.EarlyEnd)
}

// chatReadErr keeps the chat bridge's reading of a stream's end: a stream that simply
// stopped, on an event boundary or inside one, is a truncation (nil), not a transport error.
func chatReadErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

func (cc *chatCall) noteStreamEnd(readErr error, idle *idleTimer) {
	if idle.fired.Load() {
		cc.ri.upstreamErr = "stream_idle"
		return
	}
	cc.ri.upstreamErr = streamEndKind(readErr)
}

// pumpMerged runs one reader per choice and writes their chunks in arrival order. An error
// in any choice ends the whole stream after its error frame.
func (cc *chatCall) pumpMerged(resps []*http.Response, cancels []context.CancelFunc, convs []*translate.StreamConverter) {
	msgs := make(chan chunkMsg, 16)
	ctx, stopAll := context.WithCancel(cc.c.Request.Context())
	defer stopAll()
	var wg sync.WaitGroup
	for i := range resps {
		wg.Go(func() {
			idle := newIdleTimer(cc.st.cfg.Upstream.StreamIdleTimeout, cancels[i])
			defer idle.stop()
			defer cancels[i]()
			send := func(m chunkMsg) bool {
				select {
				case msgs <- m:
					return true
				case <-ctx.Done():
					return false
				}
			}
			// The single-choice relay's reader and pooled buffers: an event costs no allocation.
			events := newEventReader(&idleReader{r: resps[i].Body, idle: idle}, maxEventSize)
			defer events.release()
			var readErr error
			for {
				ev, err := events.next()
				if err != nil {
					readErr = chatReadErr(err)
					break
				}
				if ev.typ == "" && ev.data == nil {
					continue // a comment or a stray blank line
				}
				cc.ri.traceEvent(ev.typ, ev.data)
				buf, out, done := feedPooled(convs[i], ev.typ, ev.data)
				m := chunkMsg{out: out, buf: buf, last: done}
				if len(out) == 0 && !done {
					putChunkBuf(buf, out)
					continue
				}
				if !send(m) {
					putChunkBuf(buf, out)
					return
				}
				if done {
					return
				}
			}
			if ctx.Err() == nil {
				send(chunkMsg{out: convs[i].End(readErr), last: true})
			}
		})
	}
	go func() { wg.Wait(); close(msgs) }()

	remaining := len(resps)
	failed := false
	for m := range msgs {
		if failed {
			putChunkBuf(m.buf, m.out)
			continue // draining after an error frame
		}
		written := cc.write(m.out)
		errFrame := m.last && isErrorFrame(m.out)
		putChunkBuf(m.buf, m.out)
		if !written {
			stopAll()
			failed = true
			continue
		}
		if m.last {
			remaining--
			if errFrame {
				cc.ri.upstreamErr = "stream_error"
				stopAll()
				failed = true
			}
		}
	}
	if failed || remaining > 0 {
		return
	}
	if cc.meta.IncludeUsage {
		cc.write(translate.UsageChunk(cc.meta, sumUsage(usagesOf(convs))))
	}
	cc.write([]byte(translate.DoneFrame))
}

// isErrorFrame reports whether a choice ended with an error frame rather than a finish chunk.
func isErrorFrame(out []byte) bool {
	return bytes.Contains(out, []byte(`data: {"error":`))
}

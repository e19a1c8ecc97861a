package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	sse "github.com/tmaxmax/go-sse"

	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/tokens"
	"modelgate/translate"
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
	// out is the single-choice relay's chunk buffer, reused from event to event: the
	// writer has copied the frames by the time queue returns. A field rather than a local,
	// since the relay loop's frame is part of every open stream's stack.
	out []byte
}

// chatCompletions serves POST /v1/chat/completions on top of the Responses gateway. Nothing
// is written to the client before the platform accepted the request, so its 4xx, 429 and 5xx
// answers keep their status and headers.
func (s *Server) chatCompletions(c *gin.Context) {
	ri := info(c)
	ri.route = "/v1/chat/completions"
	p, st := principal(c), requestState(c)
	body, ok := readJSONBody(c, st.cfg.Server.MaxBodyBytes)
	if !ok {
		return
	}
	req, err := translate.ParseChat(body)
	if err != nil {
		writeTranslateError(c, err)
		return
	}
	ri.model, ri.stream = req.Model, req.Stream
	if !p.AllowsModel(req.Model) {
		modelNotFound(c, req.Model)
		return
	}
	// A non-stream client with stop sequences is served from an upstream stream, so the
	// upstream can be ended as soon as a stop sequence appears.
	upStream := req.Stream || len(req.Stop) > 0
	upBody, err := req.ToResponses(st.models.upstreamName(req.Model), translate.RequestOptions{
		DropExtraFields: st.cfg.Translate.DropExtraFields,
		ForceStream:     upStream && !req.Stream,
	})
	if err != nil {
		writeTranslateError(c, err)
		return
	}
	call := &chatCall{
		s: s, c: c, st: st, p: p, ri: ri, req: req, upBody: upBody, upStream: upStream,
		estimate: tokens.EstimateResponsesInput(upBody),
		meta: translate.Meta{
			ID: "chatcmpl-" + newRequestID()[4:], Created: time.Now().Unix(), Model: req.Model,
			ReasoningField: st.cfg.Translate.ReasoningField,
			IncludeUsage:   req.IncludeUsage, Legacy: req.Legacy, Logprobs: req.Logprobs, Stop: req.Stop,
		},
	}
	call.traceRequest()
	outCap := st.outputReserve(req.MaxOutputTokens)
	// n choices are n upstream generations: reserve for all of them, count one request.
	ticket := s.admit(c, p, (call.estimate+outCap)*int64(req.N), true)
	if ticket == nil {
		return
	}
	var charged ratelimit.Usage
	defer func() {
		ticket.Settle(charged)
		ri.inputTokens, ri.outputTokens = charged.InputTokens, charged.OutputTokens
	}()
	switch {
	case req.Stream:
		charged = call.stream()
	default:
		charged = call.complete()
	}
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
	return ratelimit.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
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

// bytesOf views an event's data as bytes without copying; the converters only read it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// openAll opens one upstream call per choice, in parallel. If any fails, the others are
// cancelled and the first failure is returned.
func (cc *chatCall) openAll(ctx context.Context) ([]*http.Response, []context.CancelFunc, *upstreamFailure) {
	n := cc.req.N
	resps := make([]*http.Response, n)
	cancels := make([]context.CancelFunc, n)
	fails := make([]*upstreamFailure, n)
	if n == 1 {
		resps[0], cancels[0], fails[0] = cc.s.openGateway(ctx, cc.st, cc.p, cc.ri, cc.upBody, cc.upStream)
		return resps, cancels, fails[0]
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ri := &requestInfo{requestID: cc.ri.requestID, trace: cc.ri.trace}
			resps[i], cancels[i], fails[i] = cc.s.openGateway(ctx, cc.st, cc.p, ri, cc.upBody, cc.upStream)
		})
	}
	wg.Wait()
	cc.ri.attempts = n
	for _, f := range fails {
		if f != nil {
			closeAll(resps, cancels)
			return nil, nil, f
		}
	}
	return resps, cancels, nil
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
func (cc *chatCall) complete() ratelimit.Usage {
	ctx := cc.c.Request.Context()
	if cc.upStream {
		// Served from an upstream stream to a client waiting for one answer: the whole call
		// is bounded like any non-stream call, not only by the idle timer.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, cc.st.cfg.Upstream.RequestTimeout)
		defer stop()
	}
	resps, cancels, f := cc.openAll(ctx)
	if f != nil {
		writeFailure(cc.c, f)
		return ratelimit.Usage{}
	}
	defer closeAll(resps, cancels)
	n := len(resps)
	answers := make([][]byte, n)
	usages := make([]translate.Usage, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		meta := cc.meta
		meta.ChoiceIndex = i
		work := func() {
			answers[i], usages[i], errs[i] = cc.completeOne(ctx, resps[i], cancels[i], meta)
		}
		if n == 1 {
			work()
		} else {
			wg.Go(work)
		}
	}
	wg.Wait()
	total := toUsage(sumUsage(usages))
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

// completeOne turns one upstream answer into one chat.completion.
func (cc *chatCall) completeOne(ctx context.Context, resp *http.Response, cancel context.CancelFunc, meta translate.Meta) ([]byte, translate.Usage, error) {
	estimate := translate.Usage{InputTokens: cc.estimate}
	if !cc.upStream {
		var buf bytes.Buffer
		if _, err := timedRead(cc.ri, cc.ri.keepWait, &buf, io.LimitReader(resp.Body, maxUpstreamJSON+1)); err != nil {
			return nil, estimate, err
		}
		if buf.Len() > maxUpstreamJSON || !gjson.ValidBytes(buf.Bytes()) {
			return nil, estimate, errInvalidUpstream
		}
		cc.ri.traceAnswer(buf.Bytes())
		return translate.ResponseToChat(buf.Bytes(), meta)
	}
	agg := translate.NewAggregator(meta)
	agg.SetInputEstimate(cc.estimate)
	idle := newIdleTimer(cc.st.cfg.Upstream.StreamIdleTimeout, cancel)
	defer idle.stop()
	body := &idleReader{r: resp.Body, idle: idle}
	if cc.ri.keepWait {
		body.wait = cc.ri // the client waits for the whole answer: reading it is upstream time
	}
	var finished bool
	if cc.ri.trace != nil {
		finished = aggregateTraced(cc.ri, agg, body)
	} else {
		for ev, err := range sse.Read(body, sseReadConfig) {
			if err != nil {
				break
			}
			if agg.Feed(ev.Type, bytesOf(ev.Data)) {
				finished = true
				break
			}
		}
	}
	cancel() // a stop sequence may have ended the answer early: stop generating upstream
	out, usage, err := agg.Result()
	if !finished && err != nil {
		// Cut short by modelgate, not by the platform: say why, so the client gets a 504
		// for a timeout and nothing at all when it left.
		switch {
		case idle.fired.Load():
			err = fmt.Errorf("upstream stream idle: %w", context.DeadlineExceeded)
		case ctx.Err() != nil:
			err = ctx.Err()
		}
	}
	return out, usage, err
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
	n, err := r.r.Read(p)
	if n > 0 {
		r.idle.touch()
	}
	return n, err
}

// chunkMsg is converted output of one choice on its way to the client.
type chunkMsg struct {
	out  []byte
	last bool // the choice is finished
}

// stream serves a streaming client. Each choice's upstream stream has its own converter;
// their chunks are interleaved as they come, then one usage chunk and one [DONE] close the
// stream when there are several choices (a single converter writes its own trailer).
func (cc *chatCall) stream() ratelimit.Usage {
	c := cc.c
	resps, cancels, f := cc.openAll(c.Request.Context())
	if f != nil {
		writeFailure(c, f)
		return ratelimit.Usage{}
	}
	defer closeAll(resps, cancels)
	startStream(c)
	cc.sw = newStreamWriter(c.Writer, cc.st.cfg.Upstream.KeepAliveInterval)
	defer cc.sw.stop()
	if cc.s.hooks.StreamOpened != nil {
		cc.s.hooks.StreamOpened(cc.ri.route)
		defer cc.s.hooks.StreamClosed(cc.ri.route)
	}
	n := len(resps)
	convs := make([]*translate.StreamConverter, n)
	for i := range n {
		meta := cc.meta
		meta.ChoiceIndex = i
		meta.OmitTrailer = n > 1
		convs[i] = translate.NewStreamConverter(meta)
		convs[i].SetInputEstimate(cc.estimate)
	}
	if n == 1 {
		cc.pumpDirect(resps[0], cancels[0], convs[0])
	} else {
		cc.pumpMerged(resps, cancels, convs)
	}
	return toUsage(sumUsage(usagesOf(convs)))
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

// maxKeptChunkBuf bounds the chunk buffer pumpDirect keeps between events; typical chunks
// take a few hundred bytes.
const maxKeptChunkBuf = 16 << 10

// pumpDirect converts one upstream stream on the handler's goroutine: the common case, with
// no channel hop between upstream read and client write. Converted chunks are queued and
// flushed whenever the relay is about to wait for the platform (see streamWriter).
func (cc *chatCall) pumpDirect(resp *http.Response, cancel context.CancelFunc, conv *translate.StreamConverter) {
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
		var done bool
		cc.out, done = conv.FeedTo(cc.out[:0], ev.typ, ev.data)
		if !cc.queue(cc.out) {
			cancel()
			return
		}
		if cap(cc.out) > maxKeptChunkBuf {
			cc.out = nil // a rare large chunk is not held for the rest of a long stream
		}
		if done {
			cancel() // stop sequence or terminal event: nothing more is needed upstream
			return
		}
	}
	cancel()
	if cc.c.Request.Context().Err() != nil {
		cc.ri.clientGone = true
		return
	}
	cc.noteStreamEnd(readErr, idle)
	cc.write(conv.End(readErr))
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
			var readErr error
			for ev, err := range sse.Read(&idleReader{r: resps[i].Body, idle: idle}, sseReadConfig) {
				if err != nil {
					readErr = err
					break
				}
				cc.ri.traceEvent(ev.Type, bytesOf(ev.Data))
				out, done := convs[i].Feed(ev.Type, bytesOf(ev.Data))
				if done {
					send(chunkMsg{out: out, last: true})
					return
				}
				if len(out) > 0 && !send(chunkMsg{out: out}) {
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
			continue // draining after an error frame
		}
		if !cc.write(m.out) {
			stopAll()
			failed = true
			continue
		}
		if m.last {
			remaining--
			if isErrorFrame(m.out) {
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
	cc.write(translate.DoneFrame)
}

// isErrorFrame reports whether a choice ended with an error frame rather than a finish chunk.
func isErrorFrame(out []byte) bool {
	return bytes.Contains(out, []byte(`data: {"error":`))
}

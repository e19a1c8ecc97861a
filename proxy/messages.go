package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	sse "github.com/tmaxmax/go-sse"

	"modelgate/ratelimit"
	"modelgate/tokens"
	"modelgate/translate"
)

// messagesRoute is the route label of POST /v1/messages in logs and metrics.
const messagesRoute = "/v1/messages"

// pingEvent is what an idle Messages stream sends: Anthropic's own keep-alive, which its
// clients read and ignore.
var pingEvent = []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")

// defaultPingInterval paces pings when upstream.keepalive_interval is 0: Anthropic's API
// pings its streams, and clients of it may count on that.
const defaultPingInterval = 15 * time.Second

// messages serves POST /v1/messages on top of the Responses gateway. Nothing is written to
// the client before the platform accepted the request, so its refusals keep their status.
func (s *Server) messages(c *gin.Context) {
	ri := info(c)
	ri.route = messagesRoute
	p, st := principal(c), requestState(c)
	body, ok := readJSONBody(c, st.cfg.Server.MaxBodyBytes)
	if !ok {
		return
	}
	req, err := translate.ParseMessages(body)
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
	// platform can be stopped as soon as a sequence appears.
	upStream := req.Stream || len(req.StopSequences) > 0
	upBody := req.ToResponses(st.models.upstreamName(req.Model), translate.RequestOptions{
		DropExtraFields: st.cfg.Translate.DropExtraFields,
		ForceStream:     upStream && !req.Stream,
	})
	estimate := tokens.EstimateResponsesInput(upBody)
	meta := translate.MessagesMeta{ID: "msg_" + newRequestID()[4:], Model: req.Model, StopSequences: req.StopSequences}
	ticket := s.admit(c, p, estimate+st.outputReserve(max(req.MaxTokens, 16)), true)
	if ticket == nil {
		return
	}
	var charged ratelimit.Usage
	defer func() {
		ticket.Settle(charged)
		ri.inputTokens, ri.outputTokens = charged.InputTokens, charged.OutputTokens
	}()
	ctx := c.Request.Context()
	if upStream && !req.Stream {
		// The client waits for one answer: the whole call is bounded like any non-stream
		// call, not only by the idle timer.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, st.cfg.Upstream.RequestTimeout)
		defer stop()
	}
	resp, cancel, f := s.openGateway(ctx, st, p, ri, upBody, upStream)
	if f != nil {
		writeFailure(c, f)
		return
	}
	defer resp.Body.Close()
	defer cancel()
	switch {
	case req.Stream:
		charged = s.messagesStream(c, st, resp, cancel, meta, estimate)
	case upStream:
		charged = s.messagesAggregate(ctx, c, st, resp, cancel, meta, estimate)
	default:
		charged = s.messagesComplete(c, ri, resp, meta, estimate)
	}
}

// messagesAggregate serves a non-stream client with stop sequences from an upstream stream,
// cancelling the platform once the answer is complete.
func (s *Server) messagesAggregate(ctx context.Context, c *gin.Context, st *state, resp *http.Response, cancel context.CancelFunc, meta translate.MessagesMeta, estimate int64) ratelimit.Usage {
	ri := info(c)
	agg := translate.NewMessagesAggregator(meta)
	agg.SetInputEstimate(estimate)
	idle := newIdleTimer(st.cfg.Upstream.StreamIdleTimeout, cancel)
	defer idle.stop()
	body := &idleReader{r: resp.Body, idle: idle}
	if ri.keepWait {
		body.wait = ri // the client waits for the whole answer: reading it is upstream time
	}
	finished := false
	var readErr error
	for ev, err := range sse.Read(body, sseReadConfig) {
		if err != nil {
			readErr = err
			break
		}
		if agg.Feed(ev.Type, bytesOf(ev.Data)) {
			finished = true
			break
		}
	}
	cancel() // a stop sequence may have ended the answer early: stop generating upstream
	if !finished {
		// Cut short by modelgate, not by the platform: say why, so the client gets a 504
		// for a timeout and nothing at all when it left.
		switch {
		case idle.fired.Load():
			ri.upstreamErr = "stream_idle"
			s.upstreamFailed(c, fmt.Errorf("upstream stream idle: %w", context.DeadlineExceeded))
			return toUsage(agg.Usage())
		case ctx.Err() != nil:
			s.upstreamFailed(c, ctx.Err())
			return toUsage(agg.Usage())
		}
		agg.End(chatReadErr(readErr))
	}
	out, usage, err := agg.Result()
	if err != nil {
		writeTranslateError(c, err)
		return toUsage(usage)
	}
	c.Data(http.StatusOK, "application/json", out)
	return toUsage(usage)
}

// messagesComplete serves a non-stream client. Stop sequences are applied to the finished
// answer: the platform's figures are charged as reported.
func (s *Server) messagesComplete(c *gin.Context, ri *requestInfo, resp *http.Response, meta translate.MessagesMeta, estimate int64) ratelimit.Usage {
	est := ratelimit.Usage{InputTokens: estimate}
	var buf bytes.Buffer
	if _, err := timedRead(ri, ri.keepWait, &buf, io.LimitReader(resp.Body, maxUpstreamJSON+1)); err != nil {
		s.upstreamFailed(c, err)
		return est
	}
	if buf.Len() > maxUpstreamJSON || !gjson.ValidBytes(buf.Bytes()) {
		ri.upstreamErr = "invalid_body"
		abortAnthropic(c, http.StatusBadGateway, "upstream_invalid_response", "The platform returned an invalid response.")
		return est
	}
	out, usage, err := translate.ResponseToMessage(buf.Bytes(), meta)
	charged := toUsage(usage)
	if !usage.Reported {
		charged = est
	}
	if err != nil {
		var te *translate.Error
		if errors.As(err, &te) {
			writeTranslateError(c, err)
		} else {
			s.upstreamFailed(c, err)
		}
		return charged
	}
	c.Data(http.StatusOK, "application/json", out)
	return charged
}

// messagesStream relays the upstream stream as Anthropic events through the chat bridge's
// relay loop, with Anthropic's ping for keep-alive.
func (s *Server) messagesStream(c *gin.Context, st *state, resp *http.Response, cancel context.CancelFunc, meta translate.MessagesMeta, estimate int64) ratelimit.Usage {
	ri := info(c)
	startStream(c)
	every := st.cfg.Upstream.KeepAliveInterval
	if every <= 0 {
		every = defaultPingInterval
	}
	cc := &chatCall{s: s, c: c, st: st, ri: ri, sw: newStreamWriterIdle(c.Writer, every, pingEvent)}
	defer cc.sw.stop()
	if s.hooks.StreamOpened != nil {
		s.hooks.StreamOpened(ri.route)
		defer s.hooks.StreamClosed(ri.route)
	}
	conv := translate.NewMessagesStream(meta)
	conv.SetInputEstimate(estimate)
	cc.pumpDirect(resp, cancel, conv)
	return toUsage(conv.Usage())
}

// countTokens serves POST /v1/messages/count_tokens: the estimate admission would reserve
// for the request's input, computed locally (the platform has no counting endpoint). It
// charges nothing and sends nothing upstream.
func (s *Server) countTokens(c *gin.Context) {
	ri := info(c)
	ri.route = messagesRoute + "/count_tokens"
	p, st := principal(c), requestState(c)
	body, ok := readJSONBody(c, st.cfg.Server.MaxBodyBytes)
	if !ok {
		return
	}
	req, err := translate.ParseMessagesCount(body)
	if err != nil {
		writeTranslateError(c, err)
		return
	}
	ri.model = req.Model
	if !p.AllowsModel(req.Model) {
		modelNotFound(c, req.Model)
		return
	}
	peekLimitHeaders(c)
	n := tokens.EstimateResponsesInput(req.ToResponses(st.models.upstreamName(req.Model), translate.RequestOptions{}))
	c.Data(http.StatusOK, "application/json", []byte(`{"input_tokens":`+strconv.FormatInt(n, 10)+`}`))
}

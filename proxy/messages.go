package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/tokens"
	"modelgate/translate"
)

// messagesRoute is the route label of POST /v1/messages in logs and metrics.
const messagesRoute = "/v1/messages"

// pingEvent is what an idle Messages stream sends: Anthropic's own keep-alive, which its
// clients read and ignore.
const pingEvent = "event: ping\ndata: {\"type\":\"ping\"}\n\n"

// defaultPingInterval paces pings when upstream.keepalive_interval is 0: Anthropic's API
// pings its streams, and clients of it may count on that.
const defaultPingInterval = 15 * time.Second

// messages serves POST /v1/messages on top of the Responses gateway. Nothing is written to
// the client before the platform accepted the request, so its refusals keep their status.
//
// Its frame stays under a stream for minutes, so the checks and the admission run in
// checkMessages, whose frame is gone by then (see startStream).
func (s *Server) messages(c *gin.Context) {
	m := s.checkMessages(c)
	if m == nil {
		return
	}
	defer func() { s.settle(info(c), m.ticket, m.charge) }()
	ctx := c.Request.Context()
	if m.upStream && !m.stream {
		// The client waits for one answer: the whole call is bounded like any non-stream
		// call, not only by the idle timer.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, m.st.cfg.Upstream.RequestTimeout)
		defer stop()
	}
	// The call and its charge are kept in m, and the answer is relayed in a call of its
	// own: this frame is on the stack, with the gateway's, while the platform's answer
	// headers are awaited, the deepest a stream's stack goes (TestStreamHeaderWaitDepth).
	ri := info(c)
	gc := &m.gc
	gc.start(m.st, m.p, ri, m.upBody, m.upStream, &m.reserve, 1, c.Writer.Header())
	resp, cancel, f := s.openGateway(ctx, gc)
	m.upBody, gc.body = nil, nil // the platform has it: a stream that runs for minutes need not hold it
	ri.held.Release()
	if f != nil {
		writeFailure(c, f)
		chargeFailed(&m.charge, f, m.reserve)
		return
	}
	defer resp.Body.Close()
	defer cancel()
	if m.stream {
		startStream(c) // from this frame, above the relay's (see startStream)
	}
	s.answerMessages(ctx, c, m, resp, cancel)
}

// answerMessages relays the platform's answer to m in the client's form (a stream has
// started already) and sets m.charge to what it cost.
//
//go:noinline
func (s *Server) answerMessages(ctx context.Context, c *gin.Context, m *messagesCall, resp *http.Response, cancel context.CancelFunc) {
	switch {
	case m.stream:
		// Through the same pump as chat (relay.Pump.Direct), with Anthropic's ping for
		// keep-alive, and settled the same way.
		m.charge = s.relayMessagesStream(c, m.st, resp, cancel, &m.meta, m.reserve)
	case m.upStream:
		m.charge = s.messagesAggregate(ctx, c, m.st, resp, cancel, m.meta, m.reserve)
	default:
		m.charge = s.messagesComplete(c, info(c), resp, m.meta, m.reserve)
	}
}

// messagesCall is a checked and admitted Messages request.
type messagesCall struct {
	messagesDialect // the parsed request and whether the platform is asked to stream
	st              *state
	p               *auth.Principal
	upBody          []byte // as it goes upstream; dropped once sent
	stream          bool   // the client asked for a stream
	meta            translate.MessagesMeta
	reserve         ratelimit.Usage
	ticket          *ratelimit.Ticket
	gc              gatewayCall       // its way to the platform
	charge          accounting.Charge // what it cost, settled when the handler returns
}

// checkMessages checks, translates and admits a Messages request through the preflight,
// answering the client itself when it is refused (then it returns nil).
//
//go:noinline
func (s *Server) checkMessages(c *gin.Context) *messagesCall {
	m := new(messagesCall) // the dialect the preflight fills, and the call once admitted
	a := s.preflight(c, messagesRoute, m)
	if a == nil {
		return nil
	}
	m.st, m.p, m.upBody, m.stream = a.st, a.p, a.call.upBody, a.call.stream
	// The answer names the model as the client did, as chat's does.
	m.meta = translate.MessagesMeta{ID: "msg_" + newRequestID()[4:], Model: a.call.asked, StopSequences: m.req.StopSequences}
	m.reserve, m.ticket = a.reserve, a.ticket
	return m
}

// messagesDialect is Anthropic Messages' part of the preflight.
type messagesDialect struct {
	req      *translate.MessagesRequest
	upStream bool      // the platform is asked for a stream
	sticky   stickyKey // the user or conversation a sticky model places it by
}

func (d *messagesDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	req, err := translate.ParseMessagesWith(body, parseOptions(st)) // the body's last use: the parse's copy replaces it
	if err != nil {
		writeTranslateError(c, err)
		return false
	}
	return d.checkParsed(c, st, req, call)
}

// checkParsed is check's half after the parse, out of line, as chat's is
// (TestOpenStreamStack).
//
//go:noinline
func (d *messagesDialect) checkParsed(c *gin.Context, st *state, req *translate.MessagesRequest, call *modelCall) bool {
	noteDroppedTools(c, req.DroppedTools)
	// Messages' metadata holds user_id alone (Identity.User): its tags come from the
	// header and the key.
	if !attributeIdentity(c, st, &req.Identity) {
		return false
	}
	d.req = req
	model, ok := st.models.resolve(req.Model)
	d.sticky = st.models.withSession(model, st.models.identityKey(model, &req.Identity), c.Request.Header, "")
	*call = modelCall{model: model, asked: req.Model, unknown: !ok, stream: req.Stream, maxOut: req.UpstreamMaxTokens(), choices: 1}
	return true
}

func (d *messagesDialect) prepare(_ *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	var opts translate.RequestOptions
	d.upStream, opts = translatedUpstream(st, d.req.Stream, len(d.req.StopSequences) > 0)
	st.routeCall(call, p, d.sticky)
	call.upBody = d.req.ToResponses(call.upstream, opts)
	return true
}

// messagesAggregate serves a non-stream client with stop sequences from an upstream stream,
// cancelling the platform once the answer is complete. It charges as the chat bridge's
// aggregate does (see chatCall.completeOne).
func (s *Server) messagesAggregate(ctx context.Context, c *gin.Context, st *state, resp *http.Response, cancel context.CancelFunc, meta translate.MessagesMeta, reserve ratelimit.Usage) accounting.Charge {
	ri := info(c)
	agg := translate.NewMessagesAggregator(meta)
	agg.SetInputEstimate(reserve.InputTokens)
	a := relay.NewAggregate(resp.Body, st.cfg.Upstream.StreamIdleTimeout, cancel, ri, ri.waitClock())
	defer a.Close()
	a.Read(agg.Feed)
	ch := a.Charge(c.Request.Context(), cancel, reserve, agg.Usage())
	if !a.Finished() {
		// Cut short by modelgate, not by the platform: say why, so the client gets a 504
		// for a timeout and nothing at all when it left.
		switch {
		case a.IdleFired():
			ri.UpstreamErr = "stream_idle"
			s.upstreamFailed(c, fmt.Errorf("upstream stream idle: %w", context.DeadlineExceeded))
			return ch
		case ctx.Err() != nil:
			s.upstreamFailed(c, ctx.Err())
			return ch
		}
		agg.End(a.ReadErr())
	}
	out, _, err := agg.Result()
	if err != nil {
		writeTranslateError(c, err)
		return ch
	}
	c.Data(http.StatusOK, "application/json", out)
	return ch
}

// messagesComplete serves a non-stream client. The platform billed the whole answer before
// sending it: its figures are charged as reported, and an answer that cannot be read, or
// reports no usage, is charged the reservation.
func (s *Server) messagesComplete(c *gin.Context, ri *requestInfo, resp *http.Response, meta translate.MessagesMeta, reserve ratelimit.Usage) accounting.Charge {
	var buf bytes.Buffer
	if err := relay.ReadAnswer(&buf, resp.Body, ri.waitClock()); err != nil {
		s.answerFailed(c, err) // in Anthropic's shape: the route is marked anthropic
		return accounting.ForAnswer(reserve, ratelimit.Usage{}, false)
	}
	ri.traceAnswer(buf.Bytes())
	out, usage, err := translate.ResponseToMessage(buf.Bytes(), meta)
	ch := accounting.ForAnswer(reserve, relay.UsageOf(usage), usage.Reported)
	if err != nil {
		var te *translate.Error
		if errors.As(err, &te) {
			writeTranslateError(c, err)
		} else {
			s.upstreamFailed(c, err)
		}
		return ch
	}
	c.Data(http.StatusOK, "application/json", out)
	return ch
}

// relayMessagesStream relays the upstream stream as Anthropic events, entered once the
// stream started.
//
//go:noinline
func (s *Server) relayMessagesStream(c *gin.Context, st *state, resp *http.Response, cancel context.CancelFunc, meta *translate.MessagesMeta, reserve ratelimit.Usage) accounting.Charge {
	ri := info(c)
	every := st.cfg.Upstream.KeepAliveInterval
	if every <= 0 {
		every = defaultPingInterval
	}
	p := &relay.Pump{Out: relay.NewWriterFrame(c.Writer, every, pingEvent), Obs: ri,
		Client: c.Request.Context(), Idle: st.cfg.Upstream.StreamIdleTimeout, Reserve: reserve}
	defer p.Out.Stop()
	if s.hooks.StreamOpened != nil {
		s.hooks.StreamOpened(ri.Route)
		defer s.hooks.StreamClosed(ri.Route)
	}
	conv := translate.NewMessagesStream(*meta)
	conv.SetInputEstimate(reserve.InputTokens)
	return p.Direct(resp.Body, cancel, conv)
}

// countTokens serves POST /v1/messages/count_tokens: the estimate admission would reserve
// for the request's input, computed locally (the platform has no counting endpoint). It
// charges nothing and sends nothing upstream.
func (s *Server) countTokens(c *gin.Context) {
	ri := info(c)
	ri.Route = messagesRoute + "/count_tokens"
	p, st := principal(c), requestState(c)
	body, ok := readJSONBody(c, s.bodyLimits(st.cfg))
	if !ok {
		return
	}
	asked := peekable(body)
	req, err := translate.ParseMessagesCountWith(body, parseOptions(st)) // the body's last use, as in the preflight
	if err != nil {
		noteAsked(ri, asked)
		writeTranslateError(c, err)
		return
	}
	// The name resolves as a call's would: the entry's allow-list and its team's
	// calibration apply.
	model, known := st.models.resolve(req.Model)
	ri.Model = model
	if !known || !p.AllowsModel(model) {
		modelNotFound(c, req.Model)
		return
	}
	peekLimitHeaders(c)
	raw := tokens.EstimateResponsesInput(req.ToResponses(countedUpstream(st, p, model, st.models.withSession(model, st.models.identityKey(model, &req.Identity), c.Request.Header, "")), translate.RequestOptions{}))
	n := s.calibration.Factor(p.Team, model).Count(raw)
	c.Data(http.StatusOK, "application/json", []byte(`{"input_tokens":`+strconv.FormatInt(n, 10)+`}`))
}

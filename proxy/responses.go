package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/routing"
	"modelgate/storedapi"
	"modelgate/translate"
	"modelgate/wsmode"
)

// responses passes POST /v1/responses through: the body goes upstream with the model alias
// applied and modelgate's credential, and the answer comes back as it is, streamed event by
// event when it is a stream. Usage is read on the side for the limits.
//
// Its frame is on the stack, with the gateway's, while the platform's answer headers are
// awaited, the deepest a stream's stack goes (TestStreamHeaderWaitDepth): the call and its
// charge are kept in the admitted request's record, and the relay is a call of its own.
func (s *Server) responses(c *gin.Context) {
	rc := s.admitResponses(c)
	if rc == nil {
		return
	}
	ri := info(c)
	defer func() { s.settle(info(c), rc.ticket, rc.charge) }()

	if rc.turn != nil {
		ri.onResponse = func(resp []byte) { s.keepTurn(c, rc.st, rc.turn, resp) }
	}
	gc := &rc.gc
	gc.start(rc.st, rc.p, ri, rc.body, ri.Stream, &rc.reserve, 1, c.Writer.Header())
	resp, cancel, f := s.callGateway(c, gc)
	rc.body, gc.body = nil, nil // the platform has it: a stream that runs for minutes need not hold it
	ri.held.Release()
	if f != nil {
		chargeFailed(&rc.charge, f, rc.reserve)
		return
	}
	defer cancel()
	defer resp.Body.Close()
	stream := relay.IsEventStream(resp)
	if stream && ri.Stream {
		startStream(c) // from this frame, above the relay's (see startStream)
	}
	s.relayResponses(c, rc, resp, stream, cancel)
}

// relayResponses relays the platform's answer to an admitted Responses request, a stream
// when stream (the stream started already when the client asked for one), and sets
// rc.charge to what it cost.
//
//go:noinline
func (s *Server) relayResponses(c *gin.Context, rc *admittedResponses, resp *http.Response, stream bool, cancel context.CancelFunc) {
	ri := info(c)
	ch := &rc.charge
	if stream != ri.Stream {
		// The platform answered in the other form than asked: neither can be relayed as the
		// client expects it, and what it billed for the answer cannot be read.
		ri.UpstreamErr = "invalid_body"
		abortError(c, http.StatusBadGateway, typeServer, "upstream_invalid_response", "", "The platform returned an invalid response.")
		*ch = accounting.ForAnswer(rc.reserve, ratelimit.Usage{}, false)
		return
	}
	if ri.Stream {
		*ch = s.relayResponsesStream(c, rc.st, resp, rc.reserve, cancel)
		return
	}
	*ch = s.forwardResponsesJSON(c, resp, rc.reserve)
}

// admittedResponses is a checked and admitted Responses request.
type admittedResponses struct {
	body    []byte      // as it goes upstream; dropped once sent
	turn    *storedTurn // to keep once answered; nil when the response is not kept
	st      *state
	p       *auth.Principal
	reserve ratelimit.Usage
	ticket  *ratelimit.Ticket
	gc      gatewayCall       // its way to the platform
	charge  accounting.Charge // what it cost, settled when the handler returns
}

// admitResponses checks and admits a Responses request through the preflight, or hands a
// background one to its runner; it answers the client itself when the request is refused or
// already served (then it returns nil). Its frame is gone before a stream starts (see
// startStream).
//
//go:noinline
func (s *Server) admitResponses(c *gin.Context) *admittedResponses {
	d := &responsesDialect{s: s}
	a := s.preflight(c, "/v1/responses", d)
	if a == nil {
		return nil
	}
	if d.job != nil {
		s.submitBackground(c, a, d.job, d.turn)
		return nil
	}
	return &admittedResponses{body: a.call.upBody, turn: d.turn, st: a.st, p: a.p, reserve: a.reserve, ticket: a.ticket}
}

// responsesDialect is the Responses API's part of the preflight. Its check reads the fields
// modelgate acts on; prepare expands a stored conversation and applies the model alias; a
// background response holds a place in its team's queue.
type responsesDialect struct {
	s          *Server
	ask        storedapi.Ask // what it asks of stored responses (read where they are kept)
	steering   bool          // it carries steering fields, which are removed
	background bool          // asked to run in the background, where modelgate runs those
	turn       *storedTurn   // to keep once answered; nil when the response is not kept
	job        *jobs.Job     // the background job's place, once held
	sticky     stickyKey     // the user or conversation a sticky model places it by
	stickyKind string        // the model's sticky choice; "" when it has none
}

// check is a call of its own, never inlined, so the gjson values it works with live in a
// frame that is gone before the stream starts: the handler's goroutine then holds the stream
// open for minutes on a stack that stays small (8 KB rather than 16 KB, a third of what an
// open stream costs).
//
//go:noinline
func (d *responsesDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	switch check, key := translate.CheckClientObject(body); check {
	case translate.JSONValid:
	case translate.JSONInvalid, translate.JSONTooDeep:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_json", "",
			"We could not parse the JSON body of your request. The body must be a JSON object.")
		return false
	default: // not UTF-8, or a key that only the platform would read as a field checked here
		writeTranslateError(c, translate.ClientBodyError(check, key))
		return false
	}
	// f lives in this frame alone: the scan fills it in place rather than returning a copy,
	// and its fields are read where they are (each gjson.Result is 80 bytes).
	var f translate.ResponsesFields
	translate.ScanResponsesFields(body, &f)
	if f.Dup != "" {
		writeTranslateError(c, translate.DuplicateField(f.Dup))
		return false
	}
	if f.Model.Type != gjson.String || f.Model.Str == "" {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "model", "Missing required parameter: 'model'.")
		return false
	}
	if err := translate.CheckModelName(f.Model.Str); err != nil {
		writeTranslateError(c, err)
		return false
	}
	switch {
	case !translate.Present(f.Input) && !f.TurnCarried():
		// previous_response_id, a stored prompt or a conversation may carry the turn alone.
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "input", "Missing required parameter: 'input'.")
		return false
	case translate.Present(f.Input) && f.Input.Type != gjson.String && !f.Input.IsArray():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "input", "Invalid type for 'input': expected a string or an array.")
		return false
	case f.Stream.Exists() && !f.Stream.IsBool() && f.Stream.Type != gjson.Null:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "stream", "Invalid type for 'stream': expected a boolean.")
		return false
	case f.MaxOut.Exists() && f.MaxOut.Type != gjson.Null && (f.MaxOut.Type != gjson.Number || f.MaxOut.Num != float64(int64(f.MaxOut.Num)) || f.MaxOut.Num < 0):
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "max_output_tokens", "Invalid 'max_output_tokens': expected a non-negative integer.")
		return false
	}
	if !f.TurnCarried() {
		// A prompt template or an earlier turn may declare the tools: only a request that
		// stands alone is checked here.
		if err := translate.CheckResponsesToolChoice(f.ToolChoice, f.Tools); err != nil {
			writeTranslateError(c, err)
			return false
		}
	}
	if translate.Present(f.Tools) {
		// Hosted tools the platform cannot run are dropped (or refused) before anything
		// else reads the body.
		out, dropped, err := translate.ResponsesHostedTools(body, parseOptions(st))
		if err != nil {
			writeTranslateError(c, err)
			return false
		}
		body = out
		noteDroppedTools(c, dropped)
	}
	switch {
	case !translate.Present(f.Background):
	case !f.Background.IsBool():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "background", "Invalid type for 'background': expected a boolean.")
		return false
	case st.keeper == nil:
		// Responses are not kept here (responses.store: off): background is the platform's
		// business, and goes to it untouched.
	case f.Background.Bool() && f.Store.Type == gjson.False:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "store",
			"Background responses require 'store' to be true: they are kept so they can be polled.")
		return false
	case f.Background.Bool() && f.Stream.Bool():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "unsupported_parameter", "stream",
			"Streaming a background response is not supported; poll GET /v1/responses/{id} instead.")
		return false
	default:
		d.background = f.Background.Bool()
	}
	if st.keeper != nil {
		ask, ok := storedapi.Asked(c, &f)
		if !ok {
			return false
		}
		d.ask = ask
	}
	if f.Metadata != "" {
		if err := translate.CheckMetadata(gjson.Parse(f.Metadata)); err != nil {
			writeTranslateError(c, err)
			return false
		}
	}
	if !attribute(c, st, f.EndUser(), f.Metadata) {
		return false
	}
	d.steering = f.Steering
	model, ok := st.models.resolve(f.Model.Str)
	if d.stickyKind = st.models.stickyOf(model); d.stickyKind != "" {
		d.sticky = st.models.withSession(model, responsesStickyKey(&f, d.stickyKind), c.Request.Header, f.Metadata)
	}
	*call = modelCall{model: model, asked: f.Model.Str, unknown: !ok, stream: f.Stream.Bool(), maxOut: f.MaxOut.Int(), choices: 1, upBody: body}
	return true
}

//go:noinline
func (d *responsesDialect) prepare(c *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	body, ok := call.upBody, true
	if st.keeper != nil {
		// The expanded input is what the platform charges, so it is what the estimate sees.
		if body, d.turn, ok = d.s.expandPrevious(c, st, p, body, d.ask); !ok {
			return false
		}
	}
	if d.stickyKind == config.StickyConversation && !d.sticky.OK {
		d.sticky = routing.FirstInputKey(body) // the expanded conversation's, when one was expanded
	}
	st.routeCall(call, p, d.sticky)
	body, err := translate.PrepareResponsesBody(body, call.upstream, call.asked, d.steering)
	if err != nil {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_json", "", "The request body could not be prepared.")
		return false
	}
	call.upBody = body
	// A WebSocket turn keeps the conversation it sent as its connection's chain.
	wsmode.NoteSentInput(c.Request.Context(), body)
	d.background = d.background && d.turn != nil
	return true
}

// hold takes a background response's place in its team's queue of unfinished jobs, before
// the spend and the limits are asked, so a full queue is refused without holding either.
func (d *responsesDialect) hold(c *gin.Context, st *state) (func(), bool) {
	if !d.background {
		return func() {}, true
	}
	limit := st.cfg.Responses.BackgroundMaxQueuedPerTeam
	job, ok := d.s.bg.Add(d.turn.owner, jobs.NewResponseID(), limit)
	if !ok {
		info(c).Refusal = "background_queue"
		peekLimitHeaders(c)
		if d.s.draining.Load() {
			abortError(c, http.StatusServiceUnavailable, typeServer, "shutting_down", "", "modelgate is shutting down; retry on another instance")
			return nil, false
		}
		abortError(c, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "",
			"Too many unfinished background responses ("+strconv.FormatInt(limit, 10)+" at most per team); wait for one to finish or cancel one.")
		return nil, false
	}
	d.job = job
	return func() { d.s.bg.Abandon(job) }, true
}

// modelNotFound refuses a model the caller may not use (or that does not exist). Out of
// line, so its message takes no room in the preflight's frame.
//
//go:noinline
func modelNotFound(c *gin.Context, model string) {
	abortError(c, http.StatusNotFound, typeInvalidRequest, "model_not_found", "model",
		"The model '"+apierr.SanitizePath(model)+"' does not exist or you do not have access to it.")
}

// forwardResponsesJSON relays a non-stream answer unchanged and returns its usage. The
// platform billed the whole answer before sending it, so an answer that cannot be read, or
// reports no usage, is charged the reservation.
func (s *Server) forwardResponsesJSON(c *gin.Context, resp *http.Response, reserve ratelimit.Usage) accounting.Charge {
	ri := info(c)
	buf := relay.GetAnswerBuf(resp.ContentLength)
	defer relay.PutAnswerBuf(buf)
	if err := relay.ReadAnswer(buf, resp.Body, ri.waitClock()); err != nil {
		s.answerFailed(c, err)
		return accounting.ForAnswer(reserve, ratelimit.Usage{}, false)
	}
	b := buf.Bytes()
	ri.traceAnswer(b)
	u, reported := relay.ResponseUsage(b)
	ch := accounting.ForAnswer(reserve, u, reported)
	if ri.onResponse != nil {
		ri.onResponse(b) // kept before the client can name it in its next turn
	}
	c.Data(resp.StatusCode, "application/json", b) // copied to the connection before the buffer is reused
	return ch
}

// answerFailed answers the client of a non-stream call whose answer could not be read
// (relay.ReadAnswer's error), in the route's error shape.
func (s *Server) answerFailed(c *gin.Context, err error) {
	if errors.Is(err, relay.ErrInvalidAnswer) {
		info(c).UpstreamErr = "invalid_body"
		abortError(c, http.StatusBadGateway, typeServer, "upstream_invalid_response", "", "The platform returned an invalid response.")
		return
	}
	s.upstreamFailed(c, err)
}

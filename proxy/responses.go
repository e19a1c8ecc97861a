package proxy

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/jobs"
	"modelgate/relay"
	"modelgate/routing"
	"modelgate/storedapi"
	"modelgate/translate"
)

// responsesRoute is the route label of POST /v1/responses in logs and metrics.
const responsesRoute = "/v1/responses"

// responses passes POST /v1/responses through, on the one exchange: the body goes upstream
// with the model alias applied and modelgate's credential, and the answer comes back as it
// is, streamed event by event when it is a stream. Usage is read on the side for the limits.
// A background response is handed to its runner instead.
func (s *Server) responses(c *gin.Context) {
	d := &responsesDialect{s: s} // the dialect the preflight fills, and the call once admitted
	if a := s.preflight(c, responsesRoute, d); a != nil && d.job != nil {
		s.submitBackground(c, a, d.job, d.turn)
	} else if a != nil {
		s.exchange(c, a, &d.x, d, a.call.stream)
	}
}

// responsesDialect is the Responses API's part of the preflight. Its check reads the fields
// modelgate acts on; prepare expands a stored conversation and applies the model alias; a
// background response holds a place in its team's queue.
type responsesDialect struct {
	passThrough // the platform's answer is the client's
	s           *Server
	ask         storedapi.Ask // what it asks of stored responses (read where they are kept)
	steering    bool          // it carries steering fields, which are removed
	background  bool          // asked to run in the background, where modelgate runs those
	turn        *storedTurn   // to keep once answered; nil when the response is not kept
	job         *jobs.Job     // the background job's place, once held
	sticky      stickyKey     // the user or conversation a sticky model places it by
	stickyKind  string        // the model's sticky choice; "" when it has none
	x           exchange      // the call once admitted
}

// The Responses response half (answerHalf): the platform speaks the client's dialect, so
// its answer passes through as it is.

// answer is the platform's answer itself, with its usage; a kept response is stored before
// the client can name it in its next turn.
func (d *responsesDialect) answer(_ int, body []byte) ([]byte, translate.Usage, error) {
	usage := responseUsage(body)
	if ri := d.x.ri; ri.onResponse != nil {
		ri.onResponse(body)
	}
	return body, usage, nil
}

// check is a call of its own, never inlined, so the gjson values it works with live in a
// frame that is gone before the stream starts: the handler's goroutine then holds the stream
// open for minutes on a stack that stays small (8 KB rather than 16 KB, a third of what an
// open stream costs).
//
//go:noinline
func (d *responsesDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	var f translate.ResponsesFields
	if err := translate.ReadResponsesRequest(body, &f, st.keeper != nil); err != nil {
		apierr.Untranslatable(c, err)
		return false
	}
	if translate.Present(f.Tools) {
		// Hosted tools the platform cannot run are dropped (or refused) before anything
		// else reads the body.
		out, dropped, err := translate.ResponsesHostedTools(body, parseOptions(st))
		if err != nil {
			apierr.Untranslatable(c, err)
			return false
		}
		body = out
		noteDroppedTools(c, dropped)
	}
	if st.keeper != nil {
		// Kept here: a background response is modelgate's to run (ReadResponsesRequest
		// checked it may be).
		d.background = f.Background.Bool()
		ask, ok := storedapi.Asked(c, &f)
		if !ok {
			return false
		}
		d.ask = ask
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
	if t := info(c).turn; t != nil {
		t.SentInput(body) // a WebSocket turn keeps the conversation it sent as its connection's chain
	}
	d.background = d.background && d.turn != nil
	if d.turn != nil && !d.background {
		// The answer is kept once it came, before the client can name it in its next turn.
		turn := d.turn
		info(c).onResponse = func(resp []byte) { d.s.keepTurn(c, st, turn, resp) }
	}
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

package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/jobs"
	"modelgate/relay"
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
	s          *Server
	ask        turnAsk     // what it asks of stored responses (read where they are kept)
	steering   bool        // it carries steering fields, which are removed
	background bool        // asked to run in the background, where modelgate runs those
	turn       *storedTurn // to keep once answered; nil when the response is not kept
	job        *jobs.Job   // the background job's place, once held
	sticky     stickyKey   // the user or conversation a sticky model places it by
	stickyKind string      // the model's sticky choice; "" when it has none
	x          exchange    // the call once admitted
}

// The Responses response half (answerHalf): the platform speaks the client's dialect, so
// its answer passes through as it is.

func (d *responsesDialect) streamFraming() (string, string, time.Duration) { return "", "", 0 }

// converter is nil: the event stream is relayed byte for byte (relay.Pump.Responses).
func (d *responsesDialect) converter(int, int, int64) translate.Converter { return nil }

// aggregator is not reached: the platform streams exactly when the client asked to.
func (d *responsesDialect) aggregator(int, int64) answerAggregator { return nil }

// answer is the platform's answer itself, with its usage; a kept response is stored before
// the client can name it in its next turn.
func (d *responsesDialect) answer(_ int, body []byte) ([]byte, translate.Usage, error) {
	usage := responseUsage(body)
	if ri := d.x.ri; ri.onResponse != nil {
		ri.onResponse(body)
	}
	return body, usage, nil
}

// merge is not reached: a Responses request is one choice.
func (d *responsesDialect) merge(answers [][]byte) ([]byte, error) { return answers[0], nil }

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
	var f responsesFields
	scanResponsesFields(body, &f)
	if f.dup != "" {
		writeTranslateError(c, translate.DuplicateField(f.dup))
		return false
	}
	if f.model.Type != gjson.String || f.model.Str == "" {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "model", "Missing required parameter: 'model'.")
		return false
	}
	if err := translate.CheckModelName(f.model.Str); err != nil {
		writeTranslateError(c, err)
		return false
	}
	switch {
	case !present(f.input) && !f.turnCarried():
		// previous_response_id, a stored prompt or a conversation may carry the turn alone.
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "input", "Missing required parameter: 'input'.")
		return false
	case present(f.input) && f.input.Type != gjson.String && !f.input.IsArray():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "input", "Invalid type for 'input': expected a string or an array.")
		return false
	case f.stream.Exists() && !f.stream.IsBool() && f.stream.Type != gjson.Null:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "stream", "Invalid type for 'stream': expected a boolean.")
		return false
	case f.maxOut.Exists() && f.maxOut.Type != gjson.Null && (f.maxOut.Type != gjson.Number || f.maxOut.Num != float64(int64(f.maxOut.Num)) || f.maxOut.Num < 0):
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "max_output_tokens", "Invalid 'max_output_tokens': expected a non-negative integer.")
		return false
	}
	if !f.turnCarried() {
		// A prompt template or an earlier turn may declare the tools: only a request that
		// stands alone is checked here.
		if err := translate.CheckResponsesToolChoice(f.toolChoice, f.tools); err != nil {
			writeTranslateError(c, err)
			return false
		}
	}
	if present(f.tools) {
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
	case !present(f.background):
	case !f.background.IsBool():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "background", "Invalid type for 'background': expected a boolean.")
		return false
	case st.keeper == nil:
		// Responses are not kept here (responses.store: off): background is the platform's
		// business, and goes to it untouched.
	case f.background.Bool() && f.store.Type == gjson.False:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "store",
			"Background responses require 'store' to be true: they are kept so they can be polled.")
		return false
	case f.background.Bool() && f.stream.Bool():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "unsupported_parameter", "stream",
			"Streaming a background response is not supported; poll GET /v1/responses/{id} instead.")
		return false
	default:
		d.background = f.background.Bool()
	}
	if st.keeper != nil {
		ask, ok := askedTurn(c, &f)
		if !ok {
			return false
		}
		d.ask = ask
	}
	if f.metadata != "" {
		if err := translate.CheckMetadata(gjson.Parse(f.metadata)); err != nil {
			writeTranslateError(c, err)
			return false
		}
	}
	if !attribute(c, st, endUserOf(f.user, f.safety), f.metadata) {
		return false
	}
	d.steering = f.steering
	model, ok := st.models.resolve(f.model.Str)
	if d.stickyKind = st.models.stickyOf(model); d.stickyKind != "" {
		d.sticky = st.models.withSession(model, f.stickyKey(d.stickyKind), c.Request.Header, f.metadata)
	}
	*call = modelCall{model: model, asked: f.model.Str, unknown: !ok, stream: f.stream.Bool(), maxOut: f.maxOut.Int(), choices: 1, upBody: body}
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
	if d.stickyKind == config.StickyConversation && !d.sticky.ok {
		d.sticky = firstInputKey(body) // the expanded conversation's, when one was expanded
	}
	st.routeCall(call, p, d.sticky)
	body, err := prepareResponsesBody(body, call.upstream, call.asked, d.steering)
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

// responsesFields are what modelgate reads of a Responses request, found in one pass over
// the body's top level (a lookup per field would each scan the body, and the absent ones,
// like the steering fields, all of it). A field read here that comes twice is refused
// (translate.DuplicateField): the platform might honour the copy modelgate did not check.
type responsesFields struct {
	model, input, stream, maxOut gjson.Result
	tools, toolChoice            gjson.Result
	previous, prompt, convo      gjson.Result // what may carry a turn without input
	store                        gjson.Result
	background                   gjson.Result
	// Who asks and in which conversation, for sticky routes: views of the body's `user`,
	// `safety_identifier` and `prompt_cache_key` strings (the Codex CLI sets the last to its
	// session). Strings, not gjson results, to keep this table, which lives in the frame the
	// scan runs under, small (TestOpenStreamStack).
	user, safety, cacheKey string
	// metadata is a view of the body's `metadata` object, where request tags are read from
	// (issue 28); "" when it is absent or not an object.
	metadata string
	steering bool   // a steering field is present
	dup      string // the first field read here that came twice
}

// turnCarried reports whether something other than input brings the turn's content.
func (f *responsesFields) turnCarried() bool {
	return present(f.previous) || present(f.prompt) || present(f.convo)
}

// present: set, and not null.
func present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

func scanResponsesFields(body []byte, f *responsesFields) {
	take := func(dst *gjson.Result, k, v gjson.Result) {
		if dst.Exists() {
			if f.dup == "" {
				f.dup = k.Str
			}
			return
		}
		*dst = v
	}
	// The results view the body's memory; nothing rewrites a request body in place (sjson
	// builds a new one), so they stay valid while the request lives.
	gjson.Parse(view(body)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			take(&f.model, k, v)
		case "input":
			take(&f.input, k, v)
		case "stream":
			take(&f.stream, k, v)
		case "max_output_tokens":
			take(&f.maxOut, k, v)
		case "tools":
			take(&f.tools, k, v)
		case "tool_choice":
			take(&f.toolChoice, k, v)
		case "previous_response_id":
			take(&f.previous, k, v)
		case "prompt":
			take(&f.prompt, k, v)
		case "conversation":
			take(&f.convo, k, v)
		case "store":
			take(&f.store, k, v)
		case "background":
			take(&f.background, k, v)
		case "user":
			f.user = v.Str
		case "safety_identifier":
			f.safety = v.Str
		case "prompt_cache_key":
			f.cacheKey = v.Str
		case "metadata":
			if f.metadata != "" && f.dup == "" {
				f.dup = k.Str
			}
			if v.IsObject() {
				f.metadata = v.Raw
			}
		default:
			f.steering = f.steering || translate.IsSteeringField(k.Str)
		}
		return true
	})
}

// prepareResponsesBody applies the model alias and removes client steering fields, touching
// the bytes only when there is something to change.
func prepareResponsesBody(body []byte, upstreamModel, clientModel string, steering bool) ([]byte, error) {
	var err error
	if upstreamModel != clientModel {
		if body, err = sjson.SetBytes(body, "model", upstreamModel); err != nil {
			return nil, err
		}
	}
	if !steering {
		return body, nil
	}
	return translate.StripSteeringFields(body), nil
}

// modelNotFound refuses a model the caller may not use (or that does not exist). Out of
// line, so its message takes no room in the preflight's frame.
//
//go:noinline
func modelNotFound(c *gin.Context, model string) {
	abortError(c, http.StatusNotFound, typeInvalidRequest, "model_not_found", "model",
		"The model '"+sanitizePath(model)+"' does not exist or you do not have access to it.")
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

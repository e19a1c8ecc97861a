package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/storedapi"
	"modelgate/tokens"
	"modelgate/translate"
)

// The two Responses routes the openai SDK has beside POST /v1/responses (issue 44):
// responses.compact and responses.inputTokens.count. The platform serves neither, so compact
// is emulated with one summarising call (translate.CompactRequest) admitted, limited, charged
// and logged through the one preflight like any model call, and input_tokens answers the
// calibrated estimate locally, as Messages' count_tokens does.
const (
	compactRoute     = "/v1/responses/compact"
	inputTokensRoute = "/v1/responses/input_tokens"
)

// compact serves POST /v1/responses/compact.
func (s *Server) compact(c *gin.Context) {
	d := &compactDialect{s: s}
	a := s.preflight(c, compactRoute, d)
	if a == nil {
		return
	}
	ri := info(c)
	var ch accounting.Charge
	defer func() { s.settle(ri, a.ticket, ch) }()
	var gc gatewayCall
	gc.start(a.st, a.p, ri, a.call.upBody, false, &a.reserve, 1, c.Writer.Header())
	resp, cancel, f := s.callGateway(c, &gc)
	a.call.upBody, gc.body = nil, nil
	ri.held.Release()
	if f != nil {
		chargeFailed(&ch, f, a.reserve)
		return
	}
	defer cancel()
	defer resp.Body.Close()
	ch = s.answerCompact(c, resp, a.reserve, d.input)
}

// answerCompact reads the platform's answer to the summarising call and answers the client
// with the compacted conversation, returning what the call cost: the platform's usage as
// reported (it billed the call whatever the summary is worth), else the reservation.
func (s *Server) answerCompact(c *gin.Context, resp *http.Response, reserve ratelimit.Usage, input string) accounting.Charge {
	ri := info(c)
	bad := accounting.ForAnswer(reserve, ratelimit.Usage{}, false)
	if relay.IsEventStream(resp) {
		ri.UpstreamErr = "invalid_body"
		abortError(c, http.StatusBadGateway, typeServer, "upstream_invalid_response", "", "The platform returned an invalid response.")
		return bad
	}
	buf := relay.GetAnswerBuf(resp.ContentLength)
	defer relay.PutAnswerBuf(buf)
	if err := relay.ReadAnswer(buf, resp.Body, ri.waitClock()); err != nil {
		s.answerFailed(c, err)
		return bad
	}
	b := buf.Bytes()
	ri.traceAnswer(b)
	u, reported := relay.ResponseUsage(b)
	ch := accounting.ForAnswer(reserve, u, reported)
	out, terr := translate.CompactedResponse(b, gjson.Parse(input), compactID(), s.now().Unix())
	if terr != nil {
		ri.UpstreamErr = "invalid_body"
		writeTranslateError(c, terr)
		return ch
	}
	c.Data(http.StatusOK, "application/json", out)
	return ch
}

// compactID names a compaction: cmp_ and 24 random bytes in hex, as response ids are made.
func compactID() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "cmp_" + hex.EncodeToString(b[:])
}

// compactDialect is the compact route's part of the preflight: its check reads the fields
// the route takes; prepare expands previous_response_id from the stored responses and builds
// the summarising call.
type compactDialect struct {
	s      *Server
	f      auxFields
	sticky stickyKey
	input  string // the conversation compacted (the expanded input, raw JSON), for the answer
}

//go:noinline
func (d *compactDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	f := &d.f
	if !checkAuxBody(c, st, body, translate.CompactField, f) {
		return false
	}
	if !translate.Present(f.input) && !translate.Present(f.previous) {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "input", "Missing required parameter: 'input' (or 'previous_response_id').")
		return false
	}
	if !attribute(c, st, "", f.metadata) {
		return false
	}
	model, ok := st.models.resolve(f.model)
	if kind := st.models.stickyOf(model); kind != "" {
		d.sticky = st.models.withSession(model, f.stickyKey(kind), c.Request.Header, f.metadata)
	}
	*call = modelCall{model: model, asked: f.model, unknown: !ok, choices: 1, upBody: body}
	return true
}

//go:noinline
func (d *compactDialect) prepare(c *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	body, ok := d.s.expandAux(c, st, p, call.upBody, &d.f)
	if !ok {
		return false
	}
	if !d.sticky.ok && st.models.stickyOf(call.model) == config.StickyConversation {
		d.sticky = firstInputKey(body) // the conversation's first user item, as its turns were placed
	}
	st.routeCall(call, p, d.sticky)
	instructions := translate.DefaultCompactInstructions
	if m := st.models.model(call.model); m != nil && m.CompactInstructions != "" {
		instructions = m.CompactInstructions
	}
	up, err := translate.CompactRequest(body, call.upstream, instructions)
	if err != nil {
		writeTranslateError(c, err)
		return false
	}
	d.input = gjson.GetBytes(body, "input").Raw
	call.upBody = up
	return true
}

// inputTokens serves POST /v1/responses/input_tokens: the calibrated estimate of a
// Responses body's input, what admission would reserve for it, computed locally. It sends
// nothing upstream and charges nothing.
func (s *Server) inputTokens(c *gin.Context) {
	ri := info(c)
	ri.Route = inputTokensRoute
	p, st := principal(c), requestState(c)
	body, ok := readJSONBody(c, s.bodyLimits(st.cfg))
	if !ok {
		return
	}
	asked := peekable(body)
	var f auxFields
	if !checkAuxBody(c, st, body, translate.InputTokensField, &f) {
		noteAsked(ri, asked)
		return
	}
	model, known := st.models.resolve(f.model)
	ri.Model = model
	if !known || !p.AllowsModel(model) {
		modelNotFound(c, f.model)
		return
	}
	if body, ok = s.expandAux(c, st, p, body, &f); !ok {
		return
	}
	if f.tools {
		// Hosted tools the platform cannot run are left out of a call, so of its estimate
		// too (or refused, as the call would be).
		out, _, err := translate.ResponsesHostedTools(body, parseOptions(st))
		if err != nil {
			writeTranslateError(c, err)
			return
		}
		body = out
	}
	peekLimitHeaders(c)
	// The estimate reads the input, instructions, tools and text format; the model's name is
	// none of them, so no route is chosen.
	n := s.calibration.Factor(p.Team, model).Count(tokens.EstimateResponsesInput(body))
	c.Data(http.StatusOK, "application/json", []byte(`{"object":"response.input_tokens","input_tokens":`+strconv.FormatInt(n, 10)+`}`))
}

// auxFields are what the compact and input_tokens routes read of their body, as plain
// values (the views point into the body, which nothing rewrites in place).
type auxFields struct {
	model           string
	input, previous gjson.Result
	convo           gjson.Result
	cacheKey        string
	metadata        string // the metadata object, raw; "" when absent
	tools           bool   // tools are given
}

// stickyKey is the conversation key the body names (prompt_cache_key, else conversation),
// as a Responses request's: both routes take the route their conversation would.
func (f *auxFields) stickyKey(kind string) stickyKey {
	return responsesStickyKey(&translate.ResponsesFields{CacheKey: f.cacheKey, Convo: f.convo}, kind)
}

// checkAuxBody runs the checks of a body of the compact or input_tokens route: a JSON object
// of valid UTF-8 with no case variant of a known field, only the fields known takes, each
// once, a model, and fields of the right types. A refusal has answered the client.
func checkAuxBody(c *gin.Context, st *state, body []byte, known func(string) bool, f *auxFields) bool {
	switch check, key := translate.CheckClientObject(body); check {
	case translate.JSONValid:
	case translate.JSONInvalid, translate.JSONTooDeep:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_json", "",
			"We could not parse the JSON body of your request. The body must be a JSON object.")
		return false
	default:
		writeTranslateError(c, translate.ClientBodyError(check, key))
		return false
	}
	if err := translate.CheckFields(body, known); err != nil {
		writeTranslateError(c, err)
		return false
	}
	var r translate.ResponsesFields
	translate.ScanResponsesFields(body, &r)
	if r.Model.Type != gjson.String || r.Model.Str == "" {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "model", "Missing required parameter: 'model'.")
		return false
	}
	if err := translate.CheckModelName(r.Model.Str); err != nil {
		writeTranslateError(c, err)
		return false
	}
	switch {
	case translate.Present(r.Input) && r.Input.Type != gjson.String && !r.Input.IsArray():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "input", "Invalid type for 'input': expected a string or an array.")
		return false
	case translate.Present(r.Previous) && r.Previous.Type != gjson.String:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "previous_response_id", "Invalid type for 'previous_response_id': expected a string.")
		return false
	}
	if r.Metadata != "" {
		if err := translate.CheckMetadata(gjson.Parse(r.Metadata)); err != nil {
			writeTranslateError(c, err)
			return false
		}
	}
	*f = auxFields{model: r.Model.Str, input: r.Input, previous: r.Previous, convo: r.Convo, cacheKey: r.CacheKey, metadata: r.Metadata, tools: translate.Present(r.Tools)}
	return true
}

// expandAux replaces a body's previous_response_id by the stored conversation it names, as
// POST /v1/responses does, keeping nothing. Without stored responses (responses.store: off)
// the conversation cannot be found here, and the platform keeps none: refused.
func (s *Server) expandAux(c *gin.Context, st *state, p *auth.Principal, body []byte, f *auxFields) ([]byte, bool) {
	if !translate.Present(f.previous) {
		return body, true
	}
	if st.keeper == nil {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "previous_response_not_found", "previous_response_id",
			"Responses are not stored here (responses.store: off), so 'previous_response_id' cannot be followed; send the conversation as 'input'.")
		return nil, false
	}
	in := f.input.Raw
	if !translate.Present(f.input) {
		in = "[]" // the stored conversation alone
	}
	body, _, ok := s.expandPrevious(c, st, p, body, storedapi.Ask{Continued: true, Prev: f.previous.Str, InputRaw: in, Model: f.model})
	return body, ok
}

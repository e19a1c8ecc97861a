package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/auth"
	"modelgate/config"
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

// compact serves POST /v1/responses/compact: its dialect's halves on the one exchange.
func (s *Server) compact(c *gin.Context) {
	d := &compactDialect{s: s} // the dialect the preflight fills, and the call once admitted
	if a := s.preflight(c, compactRoute, d); a != nil {
		s.exchange(c, a, &d.x, d, false)
	}
}

// The compact route's response half (answerHalf): one JSON answer, the platform's summary
// turned into the compacted conversation. It costs the platform's usage as reported (it
// billed the call whatever the summary is worth), else the reservation.

func (d *compactDialect) streamFraming() (string, string, time.Duration) { return "", "", 0 }

// converter and aggregator are not reached: the summarising call is never streamed.
func (d *compactDialect) converter(int, int, int64) translate.Converter { return nil }
func (d *compactDialect) aggregator(int, int64) answerAggregator        { return nil }
func (d *compactDialect) merge(answers [][]byte) ([]byte, error)        { return answers[0], nil }

func (d *compactDialect) answer(_ int, body []byte) ([]byte, translate.Usage, error) {
	usage := responseUsage(body)
	out, terr := translate.CompactedResponse(body, gjson.Parse(d.input), compactID(), d.s.now().Unix())
	if terr != nil { // a *translate.Error: returned as an error only when it is one
		d.x.ri.UpstreamErr = "invalid_body"
		return nil, usage, terr
	}
	return out, usage, nil
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
	input  string   // the conversation compacted (the expanded input, raw JSON), for the answer
	x      exchange // the call once admitted
}

//go:noinline
func (d *compactDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	f := &d.f
	if !checkAuxBody(c, st, body, translate.CompactField, f) {
		return false
	}
	if !present(f.input) && !present(f.previous) {
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
	r := responsesFields{cacheKey: f.cacheKey, convo: f.convo}
	return r.stickyKey(kind)
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
	var r responsesFields
	scanResponsesFields(body, &r)
	if r.model.Type != gjson.String || r.model.Str == "" {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "model", "Missing required parameter: 'model'.")
		return false
	}
	if err := translate.CheckModelName(r.model.Str); err != nil {
		writeTranslateError(c, err)
		return false
	}
	switch {
	case present(r.input) && r.input.Type != gjson.String && !r.input.IsArray():
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "input", "Invalid type for 'input': expected a string or an array.")
		return false
	case present(r.previous) && r.previous.Type != gjson.String:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "previous_response_id", "Invalid type for 'previous_response_id': expected a string.")
		return false
	}
	if r.metadata != "" {
		if err := translate.CheckMetadata(gjson.Parse(r.metadata)); err != nil {
			writeTranslateError(c, err)
			return false
		}
	}
	*f = auxFields{model: r.model.Str, input: r.input, previous: r.previous, convo: r.convo, cacheKey: r.cacheKey, metadata: r.metadata, tools: present(r.tools)}
	return true
}

// expandAux replaces a body's previous_response_id by the stored conversation it names, as
// POST /v1/responses does, keeping nothing. Without stored responses (responses.store: off)
// the conversation cannot be found here, and the platform keeps none: refused.
func (s *Server) expandAux(c *gin.Context, st *state, p *auth.Principal, body []byte, f *auxFields) ([]byte, bool) {
	if !present(f.previous) {
		return body, true
	}
	if st.keeper == nil {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "previous_response_not_found", "previous_response_id",
			"Responses are not stored here (responses.store: off), so 'previous_response_id' cannot be followed; send the conversation as 'input'.")
		return nil, false
	}
	in := f.input.Raw
	if !present(f.input) {
		in = "[]" // the stored conversation alone
	}
	body, _, ok := s.expandPrevious(c, st, p, body, turnAsk{continued: true, prev: f.previous.Str, inputRaw: in, model: f.model})
	return body, ok
}

package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/routing"
	"modelgate/storedapi"
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
	passThrough // the summarising call is one choice, never streamed
	s           *Server
	f           translate.AuxFields
	sticky      stickyKey
	input       string   // the conversation compacted (the expanded input, raw JSON), for the answer
	x           exchange // the call once admitted
}

//go:noinline
func (d *compactDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	f := &d.f
	if !checkAuxBody(c, body, translate.CompactField, f) {
		return false
	}
	if !translate.Present(f.Input) && !translate.Present(f.Previous) {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "missing_required_parameter", "input", "Missing required parameter: 'input' (or 'previous_response_id').")
		return false
	}
	if !attribute(c, st, "", f.Metadata) {
		return false
	}
	model, ok := st.models.resolve(f.Model)
	if kind := st.models.stickyOf(model); kind != "" {
		d.sticky = st.models.withSession(model, auxStickyKey(f, kind), c.Request.Header, f.Metadata)
	}
	*call = modelCall{model: model, asked: f.Model, unknown: !ok, choices: 1, upBody: body}
	return true
}

//go:noinline
func (d *compactDialect) prepare(c *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	body, ok := d.s.expandAux(c, st, p, call.upBody, &d.f)
	if !ok {
		return false
	}
	if !d.sticky.OK && st.models.stickyOf(call.model) == config.StickyConversation {
		d.sticky = routing.FirstInputKey(body) // the conversation's first user item, as its turns were placed
	}
	st.routeCall(call, p, d.sticky)
	instructions := translate.DefaultCompactInstructions
	if m := st.models.model(call.model); m != nil && m.CompactInstructions != "" {
		instructions = m.CompactInstructions
	}
	up, err := translate.CompactRequest(body, call.upstream, instructions)
	if err != nil {
		apierr.Untranslatable(c, err)
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
	var f translate.AuxFields
	if !checkAuxBody(c, body, translate.InputTokensField, &f) {
		noteAsked(ri, asked)
		return
	}
	model, ok := countModel(c, st, p, f.Model)
	if !ok {
		return
	}
	if body, ok = s.expandAux(c, st, p, body, &f); !ok {
		return
	}
	if f.Tools {
		// Hosted tools the platform cannot run are left out of a call, so of its estimate
		// too (or refused, as the call would be).
		out, _, err := translate.ResponsesHostedTools(body, parseOptions(st))
		if err != nil {
			apierr.Untranslatable(c, err)
			return
		}
		body = out
	}
	// The estimate reads the input, instructions, tools and text format; the model's name is
	// none of them, so no route is chosen.
	n := s.counted(p, model, body)
	c.Data(http.StatusOK, "application/json", []byte(`{"object":"response.input_tokens","input_tokens":`+strconv.FormatInt(n, 10)+`}`))
}

// auxStickyKey is the conversation key the body names (prompt_cache_key, else
// conversation), as a Responses request's: both routes take the route their conversation
// would.
func auxStickyKey(f *translate.AuxFields, kind string) stickyKey {
	return responsesStickyKey(&translate.ResponsesFields{CacheKey: f.CacheKey, Convo: f.Convo}, kind)
}

// checkAuxBody reads the body of the compact or input_tokens route into f
// (translate.ReadAuxFields). A refusal has answered the client.
func checkAuxBody(c *gin.Context, body []byte, known func(string) bool, f *translate.AuxFields) bool {
	var err *translate.Error
	if *f, err = translate.ReadAuxFields(body, known); err != nil {
		apierr.Untranslatable(c, err)
		return false
	}
	return true
}

// expandAux replaces a body's previous_response_id by the stored conversation it names, as
// POST /v1/responses does, keeping nothing. Without stored responses (responses.store: off)
// the conversation cannot be found here, and the platform keeps none: refused.
func (s *Server) expandAux(c *gin.Context, st *state, p *auth.Principal, body []byte, f *translate.AuxFields) ([]byte, bool) {
	if !translate.Present(f.Previous) {
		return body, true
	}
	if st.keeper == nil {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "previous_response_not_found", "previous_response_id",
			"Responses are not stored here (responses.store: off), so 'previous_response_id' cannot be followed; send the conversation as 'input'.")
		return nil, false
	}
	in := f.Input.Raw
	if !translate.Present(f.Input) {
		in = "[]" // the stored conversation alone
	}
	body, _, ok := s.expandPrevious(c, st, p, body, storedapi.Ask{Continued: true, Prev: f.Previous.Str, InputRaw: in, Model: f.Model})
	return body, ok
}

package proxy

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/translate"
)

// The Gemini API (issue 43): generateContent, streamGenerateContent and countTokens on
// /v1beta/models/{model}:{action} (and /v1/...), translated to the platform's Responses
// gateway by translate's gemini_*.go. docs/gemini.md says what maps to what.

// geminiRoute is the route label of a Gemini action in logs, traces and metrics: a fixed
// string per version and action, whatever model the path names.
func geminiRoute(a translate.GeminiPath) string {
	return a.Version + "/models/{model}:" + a.Action
}

// geminiTraceRoute is the route a Gemini request's span is named by, before its handlers
// ran: the action's route label for a POST of a known action, else the route's pattern.
func geminiTraceRoute(c *gin.Context, pattern string) string {
	if c.Request.Method == http.MethodPost {
		if a, ok := translate.ParseGeminiPath(c.Request.URL.Path); ok && a.Known() {
			return geminiRoute(a)
		}
	}
	return pattern
}

// geminiActionKey is the gin context key of the action geminiEarly read from the path.
const geminiActionKey = "modelgate.gemini"

// geminiEarly reads the action of a POST on a Gemini model path and, as admitEarly and
// checkLookup do for the other routes, refuses a caller the limiter would refuse whatever
// the body says, before the body is read. A handler of its own before gemini, so nothing it
// holds is under a stream.
func (s *Server) geminiEarly(c *gin.Context) {
	ri := info(c)
	a, ok := translate.ParseGeminiPath(c.Request.URL.Path)
	if !ok || !a.Known() {
		ri.Route = "unknown"
		abortError(c, http.StatusNotFound, typeInvalidRequest, "unknown_url", "",
			"Unknown request URL: "+c.Request.Method+" "+printable(c.Request.URL.Path, 200)+".")
		return
	}
	ri.Route = geminiRoute(a)
	c.Set(geminiActionKey, a)
	switch p := ri.principal; {
	case p == nil:
	case a.Action == translate.GeminiActionCount: // a lookup: no concurrency slot, nothing charged
		s.check(c, ri.Route, accounting.LookupRequest(p))
	default:
		s.check(c, ri.Route, accounting.EarlyRequest(p))
	}
}

// gemini serves the action geminiEarly read.
func (s *Server) gemini(c *gin.Context) {
	a := c.MustGet(geminiActionKey).(translate.GeminiPath)
	if a.Action == translate.GeminiActionCount {
		s.geminiCountTokens(c, a)
		return
	}
	s.geminiGenerate(c, a)
}

// geminiGenerate serves generateContent and streamGenerateContent: its dialect's halves on
// the one exchange.
func (s *Server) geminiGenerate(c *gin.Context, a translate.GeminiPath) {
	d := &geminiDialect{path: a.Model, stream: a.Action == translate.GeminiActionStream} // filled by the preflight, then the call
	if ad := s.preflight(c, geminiRoute(a), d); ad != nil {
		s.exchange(c, ad, &d.x, d, d.upStream)
	}
}

// geminiDialect is the Gemini API's part of the preflight, and its answer half
// (gemini_half.go).
type geminiDialect struct {
	path    string // the model part of the URL path
	stream  bool   // streamGenerateContent
	framing translate.GeminiFraming
	translated[*translate.GeminiRequest, translate.GeminiMeta]
}

func (d *geminiDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	if d.stream && c.Query("alt") != "sse" {
		d.framing = translate.GeminiJSONArray // Google's stream without alt=sse
	}
	req, err := translate.ParseGemini(body, d.path, d.stream, parseOptions(st)) // the body's last use
	if err != nil {
		apierr.Untranslatable(c, err)
		return false
	}
	return d.checkParsed(c, st, req, call)
}

// checkParsed is check's half after the parse, out of line as chat's is (TestOpenStreamStack).
//
//go:noinline
func (d *geminiDialect) checkParsed(c *gin.Context, st *state, req *translate.GeminiRequest, call *modelCall) bool {
	if maxN := st.cfg.Translate.Choices(); req.CandidateCount > maxN || (req.Stream && req.CandidateCount > 1) {
		// Each candidate is an upstream call of its own, bounded as chat's n; their streams
		// are not merged into one Gemini stream (no streamMerged), so a streamed fan-out is
		// refused rather than answered with one candidate.
		msg := "this gateway allows at most " + strconv.Itoa(maxN) + " candidates per request (translate.max_n)."
		if req.Stream {
			msg = "streamGenerateContent serves one candidate on this gateway; use generateContent for more."
		}
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "generationConfig.candidateCount",
			"* GenerateContentRequest.generation_config.candidate_count: "+msg)
		return false
	}
	// Gemini's request names no end user: the label "user" does, and the labels are the
	// request's metadata, where tags are read from.
	req.Identity.User = translate.MetadataString(req.Identity.Metadata, "user")
	d.req = req
	*call = modelCall{asked: req.Model, stream: req.Stream, maxOut: req.MaxOutputTokens, choices: req.CandidateCount}
	return nameCall(c, st, req.DroppedTools, &req.Identity, &d.sticky, call)
}

func (d *geminiDialect) prepare(_ *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	d.upStream = routeTranslated(st, p, call, d.sticky, d.req, d.req.Stream, len(d.req.StopSequences) > 0)
	// The answer names the model as the client did (modelVersion), as the other dialects'
	// do; the request is not kept past this point.
	d.meta = translate.GeminiMeta{Model: call.asked, IncludeThoughts: d.req.IncludeThoughts, StopSequences: d.req.StopSequences}
	d.req = nil
	return true
}

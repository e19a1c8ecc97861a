package proxy

import (
	"bytes"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/tokens"
	"modelgate/translate"
)

// modelCall is what a dialect makes of a request: the one call to the platform's gateway it
// becomes (or n of them, for a chat request with n choices).
type modelCall struct {
	model   string // the models[] entry the client's name resolved to (modelTable.resolve)
	asked   string // the name the client sent
	unknown bool   // no entry names it, and unlisted models are refused
	stream  bool   // the client asked for a stream
	maxOut  int64  // the output cap the platform is asked for; 0 when none is named
	choices int    // upstream generations the request fans out to; 1 but for chat's n
	upBody  []byte // the body the platform gets, once prepared
	// upstream is the platform model the call goes to, set by the dialect's prepare
	// (state.routeCall); routed says a weighted route chose it.
	upstream string
	routed   bool
}

// dialect is one client dialect's part of the preflight. Both steps answer the client
// themselves when they refuse the request (and then return false); nothing has reached the
// platform.
type dialect interface {
	// check parses and checks the body and names the call. It does no I/O: the allow-list
	// runs after it and before anything is looked up.
	check(c *gin.Context, st *state, body []byte, call *modelCall) bool
	// prepare builds the body the platform gets (call.upBody), once the caller may use the
	// model.
	prepare(c *gin.Context, st *state, p *auth.Principal, call *modelCall) bool
}

// holder is a dialect that takes a place of its own before the spend and the limits are
// asked (a background response's place in its team's queue). release gives it back when the
// request is refused later in the preflight.
type holder interface {
	hold(c *gin.Context, st *state) (release func(), ok bool)
}

// admission is a model call the preflight let through: the caller holds the ticket, and
// must settle it exactly once.
type admission struct {
	call modelCall
	st   *state
	p    *auth.Principal
	// estimate is the input reservation of one upstream call: the first estimate of the
	// prepared body, calibrated for the model, with its margin.
	estimate int64
	// reserve is one choice's reservation: its input estimate and output cap.
	reserve ratelimit.Usage
	ticket  *ratelimit.Ticket
}

// preflight runs every model route's way from the body to an admitted call, in one fixed
// order: read the body; check it (the dialect); the model allow-list; prepare the upstream
// body (the dialect); the request's trace; a dialect's own hold; the spend budgets; the
// limiter. A refusal at any step has answered the client in the route's shape, and the
// request is logged with the model and stream flag it asked for, even when its body did not
// pass the check. It returns nil then.
//
// It is a call of its own, never inlined: the body and the parse live in its frame, which is
// gone before a stream starts (see relay.StartStream).
//
//go:noinline
func (s *Server) preflight(c *gin.Context, route string, d dialect) *admission {
	a := new(admission) // the one allocation of the preflight: the call is built in place
	if !s.checkCall(c, route, d, &a.call) || !s.admitCall(c, d, a) {
		return nil
	}
	return a
}

// checkCall is the preflight's first half: the body, its check, the allow-list, the
// upstream body and the trace. The parse runs deepest under it, so its frame holds nothing
// the second half needs (TestOpenStreamStack).
//
//go:noinline
func (s *Server) checkCall(c *gin.Context, route string, d dialect, call *modelCall) bool {
	ri := info(c)
	ri.Route = route
	st := requestState(c)
	body, ok := s.readCallBody(c, st.cfg)
	if !ok {
		return false
	}
	if declaresTools(body) {
		return checkedAside(func() bool { return s.checked(c, st, d, body, call) })
	}
	return s.checked(c, st, d, body, call)
}

// checked is checkCall once the body is read: the dialect's check, the allow-list, the
// dialect's prepare.
func (s *Server) checked(c *gin.Context, st *state, d dialect, body []byte, call *modelCall) bool {
	ri := info(c)
	asked := peekable(body)
	if !d.check(c, st, body, call) {
		noteAsked(ri, asked)
		return false
	}
	ri.Model, ri.Stream = call.model, call.stream
	p := principal(c)
	if call.unknown || !p.AllowsModel(call.model) {
		modelNotFound(c, call.asked)
		return false
	}
	if !d.prepare(c, st, p, call) {
		return false
	}
	if call.routed {
		ri.UpstreamModel = call.upstream
	}
	ri.traceCall(call)
	return true
}

// admitCall is the preflight's second half: a dialect's own hold, the spend budgets and the
// limiter (admitBudgets).
//
//go:noinline
func (s *Server) admitCall(c *gin.Context, d dialect, a *admission) bool {
	p, st, call := principal(c), requestState(c), &a.call
	release := func() {}
	if h, ok := d.(holder); ok {
		if release, ok = h.hold(c, st); !ok {
			return false
		}
	}
	raw, outCap, n := tokens.EstimateResponsesInput(call.upBody), st.outputReserve(call.maxOut), int64(max(call.choices, 1))
	estimate := s.calibration.Factor(p.Team, call.model).Reserve(raw)
	ri := info(c)
	ri.InputEstimate, ri.InputReserved = raw, estimate*n
	// n choices are n upstream generations: reserve for all of them, count one request. The
	// output cap may come back lower, clamped to what a budget has left.
	ticket, outCap := s.admitBudgets(c, st, p, call, estimate, outCap, n)
	if ticket == nil {
		release()
		return false
	}
	a.st, a.p, a.estimate, a.ticket = st, p, estimate, ticket
	a.reserve = ratelimit.Usage{InputTokens: estimate, OutputTokens: outCap}
	return true
}

// maxPeek is the largest refused body whose model is read for the log. A larger one names
// none: keeping it reachable until its parse has failed would hold it beside the parser's
// own copy, doubling what a large hostile body costs at its peak.
const maxPeek = 1 << 20

// peekable is body when it is small enough to be read for its model after a refusal, or
// nil. Only what it returns stays reachable across the dialect's parse.
func peekable(body []byte) []byte {
	if len(body) > maxPeek {
		return nil
	}
	return body
}

// noteAsked records the model and stream flag a refused body asked for, as far as they can
// be read (translate.AskedModel), so its log line and metrics say what was asked. The model
// is capped when logged (maxLoggedModel), like any other.
//
//go:noinline
func noteAsked(ri *requestInfo, body []byte) {
	if ri.Model != "" {
		return
	}
	if model, stream, ok := translate.AskedModel(body); ok {
		ri.Model, ri.Stream = model, stream
	}
}

// declaresTools reports whether a body names tools. Reading and translating a tool's schema
// is the deepest frame chain a request takes (about 7 KB of stack under the handler): on the
// handler's goroutine it would double its 8 KB stack to 16 KB, and a stream keeps the larger
// stack for its whole life, so every agent's stream would hold 8 KB more. Such a body is
// checked aside (checkedAside). A key spelled with escapes is not seen: its stream costs the
// memory, nothing else.
func declaresTools(body []byte) bool { return bytes.Contains(body, []byte(`"tools"`)) }

// checkedAside runs check on a goroutine of its own, with its own stack, and waits for it. A
// panic there is raised again here, where the handler's recoverer answers it.
func checkedAside(check func() bool) bool {
	type result struct {
		ok       bool
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{panicked: r}
			}
		}()
		done <- result{ok: check()}
	}()
	r := <-done
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.ok
}

// countModel resolves the model a token-count route names as a call's would be (the entry's
// allow-list and its team's calibration apply), answering the client itself when the caller
// may not use it; ok false then.
func countModel(c *gin.Context, st *state, p *auth.Principal, asked string) (model string, ok bool) {
	model, known := st.models.resolve(asked)
	info(c).Model = model
	if !known || !p.AllowsModel(model) {
		modelNotFound(c, asked)
		return "", false
	}
	peekLimitHeaders(c)
	return model, true
}

// counted is the calibrated estimate of a Responses body's input for model: what admission
// would reserve for it, without its margin.
func (s *Server) counted(p *auth.Principal, model string, body []byte) int64 {
	return s.calibration.Factor(p.Team, model).Count(tokens.EstimateResponsesInput(body))
}

// nameCall is a translated dialect's check after its parse, the same for each: the tools it
// dropped noted, the caller's identity attributed (its end user and tags), the model the call
// asks for (call.asked) resolved, and the caller's sticky key for it.
func nameCall(c *gin.Context, st *state, dropped []string, id *translate.Identity, sticky *stickyKey, call *modelCall) bool {
	noteDroppedTools(c, dropped)
	if !attributeIdentity(c, st, id) {
		return false
	}
	model, ok := st.models.resolve(call.asked)
	*sticky = st.models.withSession(model, st.models.identityKey(model, id), c.Request.Header, "")
	call.model, call.unknown = model, !ok
	return true
}

// translatedUpstream decides how a translated dialect's request goes to the platform: as a
// stream when the client streams, and also when a non-stream client sent stop sequences, so
// the platform can be stopped as soon as one appears; the options say so to the translator.
func translatedUpstream(st *state, clientStream, stopSequences bool) (upStream bool, opts translate.RequestOptions) {
	upStream = clientStream || stopSequences
	return upStream, translate.RequestOptions{
		DropExtraFields: st.cfg.Translate.DropExtraFields,
		ForceStream:     upStream && !clientStream,
	}
}

// translated is what a translated dialect (chat, Messages, Gemini) keeps from its check to
// its answer: the parsed request R (until prepare), the answer's meta M, and the call.
type translated[R, M any] struct {
	req      R
	upStream bool      // the platform is asked for a stream
	sticky   stickyKey // the user or conversation a sticky model places it by
	meta     M
	x        exchange // the call once admitted
}

// translatedRequest is a parsed client request whose translation for the platform cannot
// fail once it parsed (Messages', Gemini's; chat's can, on a tool it cannot send).
type translatedRequest interface {
	ToResponses(upstream string, opts translate.RequestOptions) []byte
}

// routeTranslated is such a dialect's prepare up to its answer's meta: the call's route and
// the body the platform gets; it returns whether the platform is asked for a stream. Generic
// rather than over the interface, so the request's method is called without boxing it.
func routeTranslated[R translatedRequest](st *state, p *auth.Principal, call *modelCall, sticky stickyKey, req R, clientStream, stopSequences bool) (upStream bool) {
	upStream, opts := translatedUpstream(st, clientStream, stopSequences)
	st.routeCall(call, p, sticky)
	call.upBody = req.ToResponses(call.upstream, opts)
	return upStream
}

package proxy

import (
	"context"
	"net/http"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/routing"
	"modelgate/upstream"
)

// servedModelHeader names the model that served the answer when a fallback did (issue 27).
// An answer from the model asked for does not carry it.
const servedModelHeader = "x-modelgate-served-model"

// gatewayCall is one admitted model call on its way to the platform, and what its fallback
// chain needs to move it to another model (docs/routing.md): every model route and a
// background job open the platform through it, so they all fall back the same way.
type gatewayCall struct {
	st     *state
	p      *auth.Principal
	ri     *requestInfo // the request's record: the model asked, its spend hold, what it served
	body   []byte       // the Responses body, for model
	stream bool         // ask the platform for a stream
	model  string       // the model id tried now: the client's, until a fallback
	// reserve is one choice's reservation, the route's own: a fallback moves it to its
	// model's calibrated estimate, so the bounds charged later are the serving model's.
	reserve *ratelimit.Usage
	choices int64       // upstream generations per attempt (chat's n); at least 1
	header  http.Header // the answer's headers; nil for a background job
	next    int         // the asked model's next fallback to consider
	// upstream is the platform model the body names now, for its breaker; asked says its
	// breaker was asked already (by a weighted route's choice, or by moveTo), so the
	// gateway does not spend a half-open breaker's one probe a second time.
	upstream string
	asked    bool
}

// start makes gc the call of ri's request to the platform, on the model the request asked
// for, no fallback tried yet: every route's call, and a background job's, starts here.
// Out of line, so the temporaries that build it take no room in the caller's frame, which
// stays on the stack while the platform is awaited (TestStreamHeaderWaitDepth).
//
//go:noinline
func (gc *gatewayCall) start(st *state, p *auth.Principal, ri *requestInfo, body []byte, stream bool, reserve *ratelimit.Usage, choices int64, header http.Header) {
	*gc = gatewayCall{st: st, p: p, ri: ri, body: body, stream: stream, model: ri.Model, reserve: reserve, choices: choices, header: header}
}

// openGateway sends gc to the Responses gateway (retries, key pools, attempt spans),
// reporting to gc.ri, and moves down the asked model's fallbacks while an attempt fails in a
// way a fallback may help with, before anything reached the client. On success the caller
// owns resp.Body and must call cancel, which also ends the upstream request early (stop
// sequences, client gone).
func (s *Server) openGateway(ctx context.Context, gc *gatewayCall) (*http.Response, context.CancelFunc, *upstream.Failure) {
	if gc.upstream == "" {
		if gc.ri.UpstreamModel != "" {
			gc.upstream, gc.asked = gc.ri.UpstreamModel, true
		} else {
			gc.upstream = gc.st.models.upstreamName(gc.ri.Model)
		}
	}
	if gc.st.models.chained[gc.ri.Model] == nil {
		return s.openOnce(ctx, gc, gc.ri) // no fallbacks and no first_token_timeout: as ever
	}
	return s.openChained(ctx, gc)
}

// openChained is openGateway for a model with fallbacks or a first_token_timeout. Out of
// line: its loop would otherwise add to every stream's deepest frame chain, the one down
// to the transport's wait for the platform's headers (TestStreamHeaderWaitDepth).
//
//go:noinline
func (s *Server) openChained(ctx context.Context, gc *gatewayCall) (*http.Response, context.CancelFunc, *upstream.Failure) {
	before := 0 // attempts sent to the models already left: the log counts every one
	for {
		gc.ri.Attempts = 0
		resp, cancel, f := s.openOnce(ctx, gc, gc.ri)
		gc.ri.Attempts += before
		if f == nil || !s.fallBack(gc, f, f.Charge(*gc.reserve)) {
			return resp, cancel, f
		}
		before = gc.ri.Attempts
	}
}

// openOnce makes one attempt of gc on its current model (with the gateway's own retries and
// key failover), watched for a stall when the model has a first_token_timeout; ri is where
// the attempt reports (a chat choice has a record of its own).
func (s *Server) openOnce(ctx context.Context, gc *gatewayCall, ri *requestInfo) (*http.Response, context.CancelFunc, *upstream.Failure) {
	var c upstream.Call
	gc.fillCall(&c, ri)
	if m := gc.st.models.chained[gc.model]; m != nil && m.FirstTokenTimeout > 0 && gc.stream {
		return openWatched(ctx, gc.st.gateway, &c, m.FirstTokenTimeout)
	}
	return gc.st.gateway.Open(ctx, &c)
}

// fillCall sets c to gc's call on its current model, reporting to ri. Out of line, so the
// temporaries that build it take no room in openOnce's frame, which stays on the stack
// while the platform is awaited.
//
//go:noinline
func (gc *gatewayCall) fillCall(c *upstream.Call, ri *requestInfo) {
	*c = upstream.Call{Principal: gc.p, Body: gc.body, Stream: gc.stream, Model: gc.upstream, ModelAsked: gc.asked, Trail: ri.trail()}
	c.Retries, c.OwnRetries = gc.retries()
}

// retries is how many retries the attempt on gc's current model gets (issue 45): its
// models[].retries when set; else none while a fallback the caller may use is left, since a
// refused call (503 with Retry-After: 1, say) would otherwise wait out every retry before
// its fallback is tried; else (own false) the gateway's upstream.max_retries, as ever.
func (gc *gatewayCall) retries() (int, bool) {
	if e, ok := gc.st.models.entries[gc.model]; ok && e.retries != nil {
		return *e.retries, true
	}
	asked := gc.st.models.chained[gc.ri.Model]
	if asked == nil {
		return 0, false
	}
	for _, id := range asked.Fallbacks[min(gc.next, len(asked.Fallbacks)):] {
		if gc.p.AllowsModel(id) {
			return 0, true
		}
	}
	return 0, false
}

// fallBack moves gc to the asked model's next fallback that f allows (routing.Classify and
// Pick: the caller may use it, its breaker lets it through, its context window is larger
// when the input did not fit), after settling the failed attempt, whose cost is charge, at
// its own model's price. It reports whether gc moved. When it settled the attempt but no
// fallback could take the call (spend budgets refused them all), f is marked Settled, so
// the caller charges nothing more for it.
func (s *Server) fallBack(gc *gatewayCall, f *upstream.Failure, charge accounting.Charge) bool {
	asked := gc.st.models.chained[gc.ri.Model]
	if asked == nil || gc.next >= len(asked.Fallbacks) {
		return false
	}
	trigger := routing.Classify(routing.Failed{Status: f.Status, Kind: f.Kind, ClientGone: f.ClientGone,
		Code: gjson.GetBytes(f.Body, "error.code").Str})
	var window int64
	if cur := gc.st.models.model(gc.model); cur != nil {
		window = cur.ContextWindow
	}
	cands := make([]routing.Candidate, len(asked.Fallbacks))
	for i, id := range asked.Fallbacks {
		if m := gc.st.models.model(id); m != nil {
			cands[i] = routing.Candidate{ContextWindow: m.ContextWindow, Allowed: gc.p.AllowsModel(id), Healthy: true}
		}
	}
	settled := false
	for i := routing.Pick(cands, gc.next, trigger, window); i >= 0; i = routing.Pick(cands, i+1, trigger, window) {
		if !settled {
			s.settleAbandoned(gc, f, charge)
			settled = true
		}
		if s.moveTo(gc, asked.Fallbacks[i]) {
			s.noteFallback(gc, asked.Fallbacks[i], f) // issue 45: the health view and modelgate_fallbacks_total
			gc.next = i + 1
			return true
		}
	}
	gc.next = len(asked.Fallbacks)
	f.Settled = settled
	return false
}

// settleAbandoned bills a failed attempt that a fallback replaces, at the price of the model
// it was for: its spend hold settles with that cost and, when it cost anything, it makes a
// usage-history row of its own. Its usage joins the request's ticket at the end
// (requestInfo.abandoned): the limits count what the platform did, once.
func (s *Server) settleAbandoned(gc *gatewayCall, f *upstream.Failure, charge accounting.Charge) {
	ri := gc.ri
	// Derived from the request's record and spend: its end user, tags and end-user spend
	// scope are the request's (issue 42).
	rec, spend := ri.ForAttempt(gc.model, f.Kind), ri.spendOf(gc.p)
	s.settler.SettleApart(charge, &rec, spend, gc.st.prices)
	ri.spend = nil
	ri.abandoned = ri.abandoned.Plus(charge)
}

// moveTo points gc at model id: a spend hold at its price for its calibrated estimate (a
// budget that cannot cover it refuses the move), its breaker's leave, its upstream name in
// the body, its reservation. The limiter's ticket stays: one client request is one request
// and one concurrency slot, whatever it takes to serve it.
func (s *Server) moveTo(gc *gatewayCall, id string) bool {
	n := max(gc.choices, 1)
	estimate := s.calibration.Factor(gc.p.Team, id).Reserve(gc.ri.InputEstimate) // one call's first estimate
	out := gc.reserve.OutputTokens
	if s.holdSpendFor(gc.ri, gc.st, gc.p, id, estimate*n, out*n) != nil {
		return false
	}
	// A fallback with weighted routes goes to one of them (a draw, or the caller's sticky
	// route by its key). The breaker is asked last, once the call is sure to go if it says
	// yes: a half-open breaker lets one probe through, which a call that goes nowhere must
	// not take.
	call := modelCall{model: id}
	gc.st.models.route(&call, gc.p, stickyKey{}, nil)
	up := call.upstream
	allowed := s.health == nil || s.health.Allow(upstream.ModelBreaker(up))
	body, err := sjson.SetBytes(gc.body, "model", up)
	if !allowed || err != nil { // err: a body modelgate prepared itself; not expected
		gc.ri.spend.Cancel()
		gc.ri.spend = nil
		return false
	}
	gc.body, gc.model, gc.upstream, gc.asked = body, id, up, s.health != nil
	if call.routed {
		gc.ri.UpstreamModel = up
	}
	*gc.reserve = ratelimit.Usage{InputTokens: estimate, OutputTokens: out}
	gc.ri.ServedModel = id
	if gc.header != nil {
		gc.header.Set(servedModelHeader, id)
	}
	return true
}

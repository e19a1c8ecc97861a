package proxy

import (
	"context"
	"net/http"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/upstream"
)

// servedModelHeader names the model that served the answer when a fallback did.
const servedModelHeader = upstream.ServedModelHeader

// gatewayCall is one admitted model call on its way to the platform: its upstream.Chain,
// which decides everything about the attempts (the fallbacks, each model's retries, the
// first-token stall watch, the breakers; docs/routing.md), and the request's books, which
// the chain asks of it as its upstream.Host. Every model route and a background job open
// the platform through one, so they all fall back the same way.
type gatewayCall struct {
	upstream.Chain
	s  *Server
	st *state
	p  *auth.Principal
	ri *requestInfo // the request's record: the model asked, its spend hold, what it served
	// body is the Responses body: the chain reads it for each attempt and a fallback
	// rewrites its model; a route drops it once the call is open.
	body []byte
}

// start makes gc the call of ri's request to the platform, on the model the request asked
// for, no fallback tried yet: every route's call, and a background job's, starts here.
// reserve is one choice's reservation, the route's own: a fallback moves it to its model's
// calibrated estimate. Out of line, so the temporaries that build it take no room in the
// caller's frame, which stays on the stack while the platform is awaited
// (TestStreamHeaderWaitDepth).
//
//go:noinline
func (gc *gatewayCall) start(st *state, p *auth.Principal, ri *requestInfo, body []byte, stream bool, reserve *ratelimit.Usage, choices int64, header http.Header) {
	gc.s, gc.st, gc.p, gc.ri, gc.body = st.server, st, p, ri, body
	gc.Chain.Start(st.gateway, &upstream.Start{Host: gc, Health: st.health, Principal: p, Record: &ri.Record, Trail: ri.trail(),
		Body: &gc.body, Stream: stream, Reserve: reserve, Choices: choices, Header: header})
}

// openGateway sends gc to the Responses gateway down its model's fallback chain
// (upstream.Chain.Open), reporting to gc.ri: the one call every route makes. On success
// the caller owns resp.Body and must call cancel, which also ends the upstream request
// early (stop sequences, client gone).
func (s *Server) openGateway(ctx context.Context, gc *gatewayCall) (*http.Response, context.CancelFunc, *upstream.Failure) {
	return gc.Open(ctx)
}

// Hold implements upstream.Host: a spend hold at model id's price for its calibrated
// estimate (a budget that cannot cover it refuses the move), and id's route (a draw, or
// the caller's sticky route by its key, for a fallback with weighted routes).
func (gc *gatewayCall) Hold(id string, choices, output int64) (upstream.Route, bool) {
	estimate := gc.s.calibration.Factor(gc.p.Team, id).Reserve(gc.ri.InputEstimate) // one call's first estimate
	if gc.s.holdSpendFor(gc.ri, gc.st, gc.p, id, estimate*choices, output*choices) != nil {
		return upstream.Route{}, false
	}
	call := modelCall{model: id}
	gc.st.models.route(&call, gc.p, stickyKey{}, nil)
	return upstream.Route{Upstream: call.upstream, Routed: call.routed, Input: estimate}, true
}

// Unhold implements upstream.Host: the hold Hold made is given back.
func (gc *gatewayCall) Unhold() {
	gc.ri.spend.Cancel()
	gc.ri.spend = nil
}

// Abandon implements upstream.Host: it bills a failed attempt that a fallback replaces, at
// the price of the model it was for: its spend hold settles with that cost and, when it
// cost anything, it makes a usage-history row of its own. Its usage joins the request's
// ticket at the end (requestInfo.abandoned): the limits count what the platform did, once.
func (gc *gatewayCall) Abandon(model string, f *upstream.Failure, charge accounting.Charge) {
	ri := gc.ri
	// Derived from the request's record and spend: its end user, tags and end-user spend
	// scope are the request's (issue 42).
	rec, spend := ri.ForAttempt(model, f.Kind), ri.spendOf(gc.p)
	gc.s.settler.SettleApart(charge, &rec, spend, gc.st.prices)
	ri.spend = nil
	ri.abandoned = ri.abandoned.Plus(charge)
}

// FellBack implements upstream.Host: the health view and modelgate_fallbacks_total hear of
// the move (issue 45).
func (gc *gatewayCall) FellBack(asked, served string, f *upstream.Failure) {
	gc.s.noteFallback(asked, served, f)
}

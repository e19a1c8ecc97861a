package upstream

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/routing"
)

// FallBack moves the chain to the asked model's next fallback that f allows (routing.Classify
// and Pick: the caller may use it, its breaker lets it through, its context window is larger
// when the input did not fit), after settling the failed attempt, whose cost is charge, at
// its own model's price (Host.Abandon). It reports whether the chain moved; the caller then
// opens the call again (Open does; chat's n>1 fan-out opens its choices on the new model).
// When it settled the attempt but no fallback could take the call (spend budgets refused
// them all), f is marked Settled, so the caller charges nothing more for it.
func (c *Chain) FallBack(f *Failure, charge accounting.Charge) bool {
	asked := c.asked
	if asked == nil || c.next >= len(asked.fallbacks) {
		return false
	}
	trigger := routing.Classify(routing.Failed{Status: f.Status, Kind: f.Kind, ClientGone: f.ClientGone,
		Code: gjson.GetBytes(f.Body, "error.code").Str})
	var window int64
	if cur := c.g.plans[c.model]; cur != nil {
		window = cur.window
	}
	cands := make([]routing.Candidate, len(asked.fallbacks))
	for i, id := range asked.fallbacks {
		if m := c.g.plans[id]; m != nil {
			// Healthy: the breaker is asked in moveTo, about the one fallback the call is
			// about to take, so that a look never spends a half-open breaker's probe.
			cands[i] = routing.Candidate{ContextWindow: m.window, Allowed: c.p.AllowsModel(id), Healthy: true}
		}
	}
	settled := false
	for i := routing.Pick(cands, c.next, trigger, window); i >= 0; i = routing.Pick(cands, i+1, trigger, window) {
		if !settled {
			c.host.Abandon(c.model, f, charge)
			settled = true
		}
		if id := asked.fallbacks[i]; c.moveTo(id) {
			c.host.FellBack(c.rec.Model, id, f)
			c.next = i + 1
			return true
		}
	}
	c.next = len(asked.fallbacks)
	f.Settled = settled
	return false
}

// moveTo points the chain at model id: the host's spend hold at its price for its
// calibrated estimate and its route (a budget that cannot cover it refuses the move), its
// breaker's leave, its upstream name in the body, its reservation. The limiter's ticket
// stays the request's: one client request is one request and one concurrency slot,
// whatever it takes to serve it.
func (c *Chain) moveTo(id string) bool {
	out := c.reserve.OutputTokens
	route, ok := c.host.Hold(id, c.choices, out)
	if !ok {
		return false
	}
	// The breaker is asked last, once the call is sure to go if it says yes: a half-open
	// breaker lets one probe through, which a call that goes nowhere must not take.
	allowed := c.health == nil || c.health.Allow(ModelBreaker(route.Upstream))
	body, err := sjson.SetBytes(*c.body, "model", route.Upstream)
	if !allowed || err != nil { // err: a body modelgate prepared itself; not expected
		c.host.Unhold()
		return false
	}
	*c.body, c.model, c.upstream, c.upAsked = body, id, route.Upstream, c.health != nil
	if route.Routed {
		c.rec.UpstreamModel = route.Upstream
	}
	*c.reserve = ratelimit.Usage{InputTokens: route.Input, OutputTokens: out}
	c.rec.ServedModel = id
	if c.header != nil {
		c.header.Set(ServedModelHeader, id)
	}
	return true
}

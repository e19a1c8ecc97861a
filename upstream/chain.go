package upstream

import (
	"context"
	"net/http"
	"time"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// ServedModelHeader names the model that served the answer when a fallback did (issue 27).
// An answer from the model asked for does not carry it.
const ServedModelHeader = "x-modelgate-served-model"

// modelPlan is what a call's chain needs of one models[] entry: where it goes, what follows
// it, how long it may stall and how often it is retried (docs/routing.md).
type modelPlan struct {
	upstream   string        // the platform's name when the id has no routes: its upstream, else the id
	fallbacks  []string      // models[].fallbacks: configured ids, tried in order
	firstToken time.Duration // models[].first_token_timeout; 0: the stream is not watched
	retries    *int          // models[].retries; nil: the default (Chain.retries)
	window     int64         // models[].context_window in tokens; 0: unknown
	// chained: it has fallbacks or a first_token_timeout, so its calls go through the
	// chain's loop; any other model's call is one attempt, as it always was.
	chained bool
}

// newPlans is the plan of every configured model id.
func newPlans(models []config.Model) map[string]*modelPlan {
	plans := make(map[string]*modelPlan, len(models))
	for _, m := range models {
		up := m.Upstream
		if up == "" {
			up = m.ID
		}
		plans[m.ID] = &modelPlan{upstream: up, fallbacks: m.Fallbacks, firstToken: m.FirstTokenTimeout, retries: m.Retries,
			window: m.ContextWindow, chained: len(m.Fallbacks) > 0 || m.FirstTokenTimeout > 0}
	}
	return plans
}

// Host is what a chain needs of the HTTP layer, which alone holds the request's spend, its
// calibration, its weighted routes and its settlement. The chain decides; the host keeps the
// books.
type Host interface {
	// Hold holds the spend of the next attempt on model id at id's price, for id's
	// calibrated input estimate (one choice's) times choices and output tokens of output
	// each, and chooses id's route. false: a spend budget refused it, and nothing is held.
	Hold(id string, choices, output int64) (Route, bool)
	// Unhold gives back what the last Hold held: the chain did not move after all (the
	// route's breaker refused it).
	Unhold()
	// Abandon settles the failed attempt on model that the chain moves past, whose cost is
	// charge, at model's price and apart from the request (accounting.Settler.SettleApart);
	// its usage still joins the request's ticket at the end.
	Abandon(model string, f *Failure, charge accounting.Charge)
	// FellBack tells the operator's views (health window, metrics) that a call for asked is
	// now served by served, after f.
	FellBack(asked, served string, f *Failure)
}

// Route is where Hold sends the next attempt.
type Route struct {
	Upstream string // the platform model the body is to name
	Routed   bool   // chosen among weighted routes: the record names it (upstream_model)
	Input    int64  // one choice's calibrated input estimate for the model, its reservation's input
}

// Start is what a chain starts from: an admitted call on the model the client asked for.
type Start struct {
	Host Host
	// Health is what a fallback's breaker is asked before the call moves to it (the same as
	// weighted routes consult); nil: every model is healthy.
	Health    Health
	Principal *auth.Principal
	// Record is the request's: the model asked (Model) and a weighted route's choice
	// (UpstreamModel) are read from it; the attempts, the model served and its route are
	// written to it.
	Record *reqlog.Record
	Trail  Trail // where the request's attempts report; its Attempts are Record.Attempts
	// Body is the Responses body, owned by the caller, who may drop it once the call is
	// open (a stream that runs for minutes need not hold it); a fallback rewrites its model.
	Body   *[]byte
	Stream bool // ask the platform for a stream
	// Reserve is one choice's reservation: a fallback moves it to its model's calibrated
	// estimate, so the bounds charged later are the serving model's.
	Reserve *ratelimit.Usage
	Choices int64       // upstream generations per attempt (chat's n); at least 1
	Header  http.Header // the answer's headers, for ServedModelHeader; nil for a background job
}

// Chain is one admitted call on its way to the platform: the attempt loop over the asked
// model's fallbacks (docs/routing.md). It owns the choices: which model is tried next
// (routing.Classify and Pick), how often each is retried, the first-token stall watch, and
// the breakers' say; its Host keeps the request's books. Every model route, chat's n>1
// fan-out and a background job open the platform through one.
type Chain struct {
	g       *Gateway
	host    Host
	health  Health
	p       *auth.Principal
	rec     *reqlog.Record
	trail   Trail
	body    *[]byte
	stream  bool
	reserve *ratelimit.Usage
	choices int64
	header  http.Header
	asked   *modelPlan // the asked model's plan; nil: a model the config does not list
	model   string     // the model id tried now: the client's, until a fallback
	next    int        // the asked model's next fallback to consider
	// upstream is the platform model the body names now, for its breaker; upAsked says its
	// breaker was asked already (by a weighted route's choice, or by moveTo), so the
	// gateway does not spend a half-open breaker's one probe a second time.
	upstream string
	upAsked  bool
}

// Start makes c the call s describes, on g, on the model the request asked for, no fallback
// tried yet.
func (c *Chain) Start(g *Gateway, s *Start) {
	*c = Chain{g: g, host: s.Host, health: s.Health, p: s.Principal, rec: s.Record, trail: s.Trail, body: s.Body,
		stream: s.Stream, reserve: s.Reserve, choices: max(s.Choices, 1), header: s.Header,
		asked: g.plans[s.Record.Model], model: s.Record.Model}
	c.trail.Attempts = &s.Record.Attempts // openChained adds up every model's attempts there
	switch {
	case s.Record.UpstreamModel != "":
		c.upstream, c.upAsked = s.Record.UpstreamModel, true
	case c.asked != nil:
		c.upstream = c.asked.upstream
	default: // not configured: its name goes to the platform as it came
		c.upstream = s.Record.Model
	}
}

// Model is the model id tried now: the one asked for, until a fallback.
func (c *Chain) Model() string { return c.model }

// Open sends the call to the Responses gateway (retries, key pools, attempt spans),
// reporting to the request's record, and moves down the asked model's fallbacks while an
// attempt fails in a way a fallback may help with, before anything reached the client. On
// success the caller owns resp.Body and must call cancel, which also ends the upstream
// request early (stop sequences, client gone).
func (c *Chain) Open(ctx context.Context) (*http.Response, context.CancelFunc, *Failure) {
	if c.asked == nil || !c.asked.chained {
		return c.Attempt(ctx, &c.trail) // no fallbacks and no first_token_timeout: as ever
	}
	return c.openChained(ctx)
}

// openChained is Open for a model with fallbacks or a first_token_timeout. Out of line: its
// loop would otherwise add to every stream's deepest frame chain, the one down to the
// transport's wait for the platform's headers (proxy's TestStreamHeaderWaitDepth).
//
//go:noinline
func (c *Chain) openChained(ctx context.Context) (*http.Response, context.CancelFunc, *Failure) {
	before := 0 // attempts sent to the models already left: the log counts every one
	for {
		c.rec.Attempts = 0
		resp, cancel, f := c.Attempt(ctx, &c.trail)
		c.rec.Attempts += before
		if f == nil || !c.FallBack(f, f.Charge(*c.reserve)) {
			return resp, cancel, f
		}
		before = c.rec.Attempts
	}
}

// Attempt makes one attempt of the call on its current model (with the gateway's own
// retries and key failover), watched for a stall when the model has a first_token_timeout;
// tr is where the attempt reports (each of chat's n choices has one of its own). It is safe
// for the choices to call side by side; FallBack is not, and runs once they all ended.
func (c *Chain) Attempt(ctx context.Context, tr *Trail) (*http.Response, context.CancelFunc, *Failure) {
	var call Call
	c.fill(&call, tr)
	if m := c.g.plans[c.model]; m != nil && m.firstToken > 0 && c.stream {
		return c.g.openWatched(ctx, &call, m.firstToken)
	}
	return c.g.Open(ctx, &call)
}

// fill sets call to the chain's call on its current model, reporting to tr. Out of line, so
// the temporaries that build it take no room in Attempt's frame, which stays on the stack
// while the platform is awaited.
//
//go:noinline
func (c *Chain) fill(call *Call, tr *Trail) {
	*call = Call{Principal: c.p, Body: *c.body, Stream: c.stream, Model: c.upstream, ModelAsked: c.upAsked, Trail: *tr}
	call.Retries, call.OwnRetries = c.retries()
}

// retries is how many retries the attempt on the current model gets (issue 45): its
// models[].retries when set; else none while a fallback the caller may use is left, since a
// refused call (503 with Retry-After: 1, say) would otherwise wait out every retry before
// its fallback is tried; else (own false) the gateway's upstream.max_retries, as ever.
func (c *Chain) retries() (int, bool) {
	if m := c.g.plans[c.model]; m != nil && m.retries != nil {
		return *m.retries, true
	}
	if c.asked == nil {
		return 0, false
	}
	for _, id := range c.asked.fallbacks[min(c.next, len(c.asked.fallbacks)):] {
		if c.p.AllowsModel(id) {
			return 0, true
		}
	}
	return 0, false
}

package upstream

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"sort"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/platform"
	"modelgate/reqlog"
	"modelgate/tracing"
)

// Gateway calls the platform's model gateway for one loaded config: its retry policy, its
// request timeout and every team's pool of platform keys. A reload builds a new Gateway, so
// the rules never change half-way through a request and every key starts healthy again.
type Gateway struct {
	platform *platform.Client
	tracer   *tracing.Tracer // nil: tracing off
	log      *slog.Logger
	policy   Policy
	timeout  time.Duration // upstream.request_timeout
	// shared: calls go with modelgate's own keys (auth keys mode), the team's pool; otherwise
	// with the caller's own platform key.
	shared bool
	pools  map[string]*Pool // team name -> its platform keys
	// runtime is the pool of the teams created through the admin API: the config's default
	// platform keys, which a config team without keys of its own gets too. nil: none.
	runtime *Pool
	// served are the teams with local keys, in config order: a team nobody can call as does
	// not make the instance unready when its platform keys are out.
	served []string
	epoch  time.Time // origin of the monotonic readings that time upstream waits

	// Circuit breakers (issue 27). health is nil when breakers are off; models are the
	// upstream names the config lists, the only ones given a breaker, so a name a caller
	// made up never becomes one.
	health Health
	models map[string]string // upstream model -> its breaker's name, made once
	// plans are the configured model ids' fallbacks, first-token bounds and retry counts,
	// which a Chain follows (chain.go).
	plans map[string]*modelPlan
}

// Deps are what every Gateway of a server shares across reloads.
type Deps struct {
	Platform *platform.Client
	Tracer   *tracing.Tracer  // nil: attempts are not traced
	Log      *slog.Logger     // nil: silent
	Now      func() time.Time // the pools' clock (cool-downs, probes); nil is time.Now
	// Health is the circuit breakers every Gateway of the process reports to and consults
	// (package breaker); nil: no breakers.
	Health Health
}

// New builds the Gateway of cfg. shared says whether calls go with the config's platform
// keys (auth keys mode) rather than each caller's own.
func New(d Deps, cfg *config.Config, shared bool) *Gateway {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	maxRetries := 2
	if cfg.Upstream.MaxRetries != nil {
		maxRetries = *cfg.Upstream.MaxRetries
	}
	g := &Gateway{platform: d.Platform, tracer: d.Tracer, log: d.Log, policy: DefaultPolicy(maxRetries),
		timeout: cfg.Upstream.RequestTimeout, shared: shared, pools: make(map[string]*Pool, len(cfg.Teams)), epoch: time.Now(),
		health: d.Health, models: make(map[string]string, len(cfg.Models)), plans: newPlans(cfg.Models)}
	for _, m := range cfg.Models {
		g.models[m.Upstream] = ModelBreaker(m.Upstream)
	}
	warn := func(msg string, args ...any) { g.log.Warn(msg, args...) }
	for i := range cfg.Teams {
		t := &cfg.Teams[i]
		pool := newPool(t.Name, cfg.TeamPlatformKeys(t), d.Now)
		pool.log = warn
		if shared {
			pool.health = d.Health
		}
		g.pools[t.Name] = pool
		if len(t.Keys) > 0 {
			g.served = append(g.served, t.Name)
		}
	}
	if defaults := cfg.TeamPlatformKeys(&config.Team{}); shared && len(defaults) > 0 {
		// Shared by every runtime team: they have no keys of their own, and a pool per team
		// would only split the same keys' cool-downs. Its keys' breakers are the same ones
		// (named by fingerprint), so an outage one pool sees, the other avoids too.
		g.runtime = newPool(RuntimePool, defaults, d.Now)
		g.runtime.log = warn
		g.runtime.health = d.Health
	}
	return g
}

// RuntimePool is the team name the runtime teams' pool reports its keys under.
const RuntimePool = "(runtime)"

// Policy is the retry policy calls follow.
func (g *Gateway) Policy() Policy { return g.policy }

// WithPolicy returns a Gateway that retries by p and shares g's key pools. Tests use it to
// watch or spend the waits the policy chooses.
func (g *Gateway) WithPolicy(p Policy) *Gateway {
	c := *g
	c.policy = p
	return &c
}

// Pool is team's pool of platform keys, or nil for a team the config does not name.
func (g *Gateway) Pool(team string) *Pool { return g.pools[team] }

// KeyStates reports every team's platform keys by fingerprint, sorted by team, for metrics.
func (g *Gateway) KeyStates() []reqlog.KeyState {
	var out []reqlog.KeyState
	for _, pool := range g.pools {
		out = append(out, pool.States()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Team < out[j].Team })
	return out
}

// TeamWithoutKeys names a team with callers none of whose platform keys is in service, or
// "" (always "" when callers bring their own keys): readiness fails while there is one.
func (g *Gateway) TeamWithoutKeys() string {
	if !g.shared {
		return ""
	}
	for _, team := range g.served {
		if !g.pools[team].HasUsable() {
			return team
		}
	}
	return ""
}

// Trail is where a call reports to the request it serves. Its zero value keeps nothing.
type Trail struct {
	RequestID string     // sent to the platform with each attempt
	Span      trace.Span // the request's span, parent of each attempt's span; nil: untraced
	Attempts  *int       // set to the number of attempts sent; nil: not kept
	// Wait, when set, gathers the time spent waiting for the platform (nanoseconds): from
	// asking for a connection to the first byte of each attempt's answer. Retries each
	// count; a backoff sleep between them is modelgate's own choice and does not.
	Wait *atomic.Int64
}

// Call is one call to the Responses gateway.
type Call struct {
	Principal *auth.Principal // whose call: the team's pool, or the caller's own key
	Body      []byte          // a Responses body
	Stream    bool            // ask for an event stream
	// Model is the upstream model the body names, for its circuit breaker; empty: read
	// from Body when breakers are on.
	Model string
	// ModelAsked says the caller already asked the model's breaker (a weighted route's
	// choice does): Open does not ask again, which would spend a half-open breaker's one
	// probe twice and refuse the call that holds it.
	ModelAsked bool
	// Watched says the stream's first output event is waited for (a model's
	// first_token_timeout, openWatched): an opened stream is not yet a success for the
	// model's breaker, and the watch reports how it went with reportWatched.
	Watched bool
	// OwnRetries says Retries, not the gateway's upstream.max_retries, bounds this call's
	// retries: a model with fallbacks gets none unless its models[].retries says otherwise,
	// so a refused call moves to the fallback at once (docs/routing.md).
	OwnRetries bool
	Retries    int
	Trail
}

// retries is how many retries c may have.
func (g *Gateway) retries(c *Call) int {
	if c.OwnRetries {
		return max(c.Retries, 0)
	}
	return g.policy.MaxRetries
}

// Open sends c with retries. On success the caller owns resp.Body and must call cancel, which
// also ends the upstream request early (stop sequences, client gone). Otherwise the Failure
// says what the client is to be told and whether the platform may have billed the call.
//
// c is passed by pointer: these frames are on a stream's stack while it waits for the
// platform's answer headers, its deepest moment, and a Call copied into each would take
// room there (proxy's TestStreamHeaderWaitDepth).
func (g *Gateway) Open(parent context.Context, c *Call) (*http.Response, context.CancelFunc, *Failure) {
	breaker := g.modelBreaker(c)
	if breaker != "" && !c.ModelAsked && !g.health.Allow(breaker) {
		return nil, nil, breakerOpen()
	}
	resp, cancel, f := g.open(parent, c)
	if breaker != "" && (f != nil || !c.Watched) {
		if failed, judged := ModelFailed(f); judged && (g.shared || f == nil || f.Status != http.StatusTooManyRequests) {
			// (A caller's own key's 429 is that key's limit, not the model's trouble.)
			g.health.Report(breaker, failed)
		}
	}
	return resp, cancel, f
}

// Health is the circuit breakers this Gateway reports to; nil when there are none. A
// failure Open cannot see (a stall before the first token) is reported through
// reportWatched.
func (g *Gateway) Health() Health { return g.health }

// reportWatched tells c's model breaker how a Watched call went once its caller knows:
// stalled (no output event within the model's first_token_timeout) is a failure, like a
// 5xx, so a model that always stalls is skipped (its fallback served, or the call refused)
// instead of costing every call the whole timeout; output in time is a success. A call
// that failed before its stream opened was reported by Open and is not reported again.
func (g *Gateway) reportWatched(c *Call, stalled bool) {
	if b := g.modelBreaker(c); b != "" {
		g.health.Report(b, stalled)
	}
}

func (g *Gateway) open(parent context.Context, c *Call) (*http.Response, context.CancelFunc, *Failure) {
	deadline := time.Now().Add(g.timeout)
	var ctx context.Context
	var cancel context.CancelFunc
	if c.Stream {
		// A stream may run for long; once it started only the idle timer bounds it.
		ctx, cancel = context.WithCancel(parent)
	} else {
		ctx, cancel = context.WithDeadline(parent, deadline)
	}
	accept := "application/json"
	if c.Stream {
		accept = "text/event-stream"
	}
	// sent is whether the current attempt's request was written whole; an attempt that
	// never got that far cannot have been billed.
	var sent atomic.Bool
	ct := &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err == nil {
			sent.Store(true)
		}
	}}
	if c.Wait != nil {
		g.timeWait(ct, c.Wait)
	}
	resp, err := g.attempt(ctx, &c.Trail, deadline, g.keysFor(c.Principal), g.retries(c), func(ctx context.Context, key string) (*http.Request, error) {
		sent.Store(false)
		return g.platform.NewGatewayRequest(httptrace.WithClientTrace(ctx, ct), platform.Call{
			Method: http.MethodPost, Path: platform.ResponsesPath, Body: c.Body,
			ContentType: "application/json", Accept: accept,
			Key: key, RequestID: c.RequestID,
		})
	})
	if err != nil {
		cancel()
		if parent.Err() != nil {
			// The caller's own context ended (a client gone, a background job cancelled). The
			// transport may report that context's cause instead of context.Canceled, which
			// alone would read as an unknown failure of the platform.
			err = parent.Err()
		}
		f := TransportFailure(err)
		f.MaybeBilled = sent.Load()
		return nil, nil, f
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		return nil, nil, g.statusFailure(c.RequestID, resp)
	}
	return resp, cancel, nil
}

// timeWait sets ct's hooks that add each attempt's wait for its first byte to wait.
func (g *Gateway) timeWait(ct *httptrace.ClientTrace, wait *atomic.Int64) *httptrace.ClientTrace {
	var began atomic.Int64
	ct.GetConn = func(string) { began.Store(int64(time.Since(g.epoch))) }
	ct.GotFirstResponseByte = func() {
		if b := began.Load(); b != 0 {
			wait.Add(int64(time.Since(g.epoch)) - b)
		}
	}
	return ct
}

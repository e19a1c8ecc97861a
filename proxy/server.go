// Package proxy is modelgate's HTTP face: the /v1 routes, the sidecar routes, health and
// admin, and the calls they make to the platform.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/breaker"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/cors"
	"modelgate/jobs"
	"modelgate/journal"
	"modelgate/overhead"
	"modelgate/platform"
	"modelgate/probes"
	"modelgate/ratelimit"
	"modelgate/redisconn"
	"modelgate/reqbody"
	"modelgate/reqlog"
	"modelgate/sidecar"
	"modelgate/store"
	"modelgate/stored"
	"modelgate/storedapi"
	"modelgate/tracing"
	"modelgate/upstream"
	"modelgate/wsmode"
)

// Deps are what a Server is built from.
type Deps struct {
	Config   *config.Config
	Auth     *auth.Authenticator
	Limiter  *ratelimit.Limiter
	Platform *platform.Client
	Logger   *slog.Logger
	// Hooks are optional observers (metrics); nil fields are skipped.
	Hooks reqlog.Hooks
	// MetricsHandler, when set, is served at GET /metrics.
	MetricsHandler http.Handler
	// Now is the clock for caches and asset expiry; nil means time.Now. Tests inject one.
	Now func() time.Time
	// Store keeps the records that outlive the process and are shared by replicas (issued
	// keys, stored responses, usage history). Nil leaves those features without storage.
	Store store.Store
	// StoreWrites hears of the record store's failed background writes and says whether the
	// store is degraded (for /readyz); the keeper of stored responses reports to it. Nil:
	// one of the server's own.
	StoreWrites *store.WriteHealth
	// HeldResponses bounds the stored responses held in memory while the store refuses
	// them, in bytes, and HeldRetry is how often they are tried again; 0: the keeper's
	// defaults (64 MiB, 1 s). Tests lower them.
	HeldResponses int64
	HeldRetry     time.Duration

	// Team self-service (package admin): the handler of /admin/keys, /admin/teams,
	// /admin/usage/history and /admin/ui/, the issued keys every Authenticator consults, the
	// spend budgets and the usage history. Each may be nil.
	Admin   http.Handler
	Issued  *auth.Issued
	Ledger  *billing.Ledger
	History *billing.Recorder
	// Calibration learns how each model's reported input tokens compare with modelgate's
	// estimates, for reservations, count_tokens and GET /admin/usage. Nil: one of this
	// process alone, kept in memory.
	Calibration *calibration.Table
	// Breakers are the process's circuit breakers per upstream model and platform key
	// (package breaker), shared by every reload's gateway; nil: none.
	Breakers *breaker.Set

	// Alerts reports the budget thresholds crossed today for GET /admin/usage (the alerts'
	// Watcher); nil: none shown.
	Alerts AlertsView

	// Tracer, when set, traces requests (see package tracing); nil is tracing off.
	Tracer *tracing.Tracer

	// Journal keeps every admitted call until it settles, so that the next start of a replica
	// killed with calls in flight charges them (SettleCrashed); nil: none kept.
	Journal *journal.Journal

	// Health is what a model's weighted routes and fallbacks consult to skip an unhealthy
	// model; nil: the Breakers (every model healthy without them). Tests set one of their own.
	Health upstream.Health

	// BackgroundLease is how long a background job's claim outlives a runner that stopped
	// renewing it (see package jobs); 0 is the default, 30s. Tests shorten it.
	BackgroundLease time.Duration
}

// state is everything a config reload replaces. Requests load it once at their start, so a
// reload never changes the rules half-way through one.
type state struct {
	cfg    *config.Config
	auth   *auth.Authenticator
	models modelTable
	keeper *stored.Keeper // stored responses; nil when not kept (store: off, or no store)
	prices billing.Prices
	// health is what the circuit breakers say of each upstream model, consulted by the
	// choice between weighted routes; nil: everything is healthy.
	health upstream.Health
	// gateway calls the platform with this config's retry policy, key pools and fallback
	// chains.
	gateway *upstream.Gateway
	// server is the Server st serves under: what a call's fallback asks of it (spend
	// holds, calibration, settlement, the health window) is the server's, not the config's.
	server *Server
	// tagKeys are usage.tag_keys, sorted: the request tags recorded (issue 28).
	tagKeys []string
}

// outputReserve is how many output tokens admission reserves for a call that asked for at
// most asked: the config's default when it named no cap.
func (st *state) outputReserve(asked int64) int64 {
	if asked <= 0 {
		return st.cfg.Ratelimit.DefaultMaxOutputTokens
	}
	return asked
}

// Server serves modelgate's routes. Create it with New.
type Server struct {
	st       atomic.Pointer[state]
	limiter  *ratelimit.Limiter
	platform *platform.Client
	log      *slog.Logger
	hooks    reqlog.Hooks
	now      func() time.Time
	engine   *gin.Engine
	ready    atomic.Bool
	draining atomic.Bool
	records  store.Store      // nil: no durable records
	journal  *journal.Journal // admitted calls not settled yet; nil: none kept
	// storeBudget: the stores are on Redis, so each request gets a store budget.
	storeBudget bool
	keeper      *stored.Keeper // stored responses over records; nil without records
	kept        *storedapi.Service
	admin       http.Handler
	issued      *auth.Issued
	ledger      *billing.Ledger
	history     *billing.Recorder
	settler     accounting.Settler
	callers     *auth.Callers   // passthrough callers with a limit scope of their own
	bg          *jobs.Registry  // background responses this instance runs
	tracer      *tracing.Tracer // nil: tracing off
	owners      sidecar.Owners  // who uploaded each asset (sidecar routes)
	// inflating is the room gzip request bodies being inflated share (max_inflating_bytes).
	inflating reqbody.Budget
	// bodies is the room request bodies held and queued WebSocket messages share
	// (max_inflight_body_bytes).
	bodies reqbody.Room
	// calibration learns each model's ratio of reported to estimated input tokens; never nil.
	calibration *calibration.Table
	// breakers are the circuit breakers every gateway reports to; nil: none.
	breakers *breaker.Set
	// window is this replica's recent model calls, for GET /admin/health (issue 45).
	window  *reqlog.Window
	health  upstream.Health // what weighted routes consult; nil: all healthy
	sockets *wsmode.Server  // the Responses WebSocket mode's connections
	alerts  AlertsView      // nil: no alerts

	// writes hears of failed writes to the record store, and says when /readyz is
	// degraded; holdBytes and holdRetry are Deps.HeldResponses and HeldRetry.
	writes    *store.WriteHealth
	holdBytes int64
	holdRetry time.Duration
}

// New builds a Server. The config must already be validated.
func New(d Deps) (*Server, error) {
	if d.Config == nil || d.Auth == nil || d.Limiter == nil || d.Platform == nil {
		return nil, errors.New("proxy: config, auth, limiter and platform are required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.StoreWrites == nil {
		d.StoreWrites = &store.WriteHealth{}
	}
	s := &Server{limiter: d.Limiter, platform: d.Platform, log: d.Logger, hooks: d.Hooks, now: d.Now, records: d.Store, writes: d.StoreWrites,
		holdBytes: d.HeldResponses, holdRetry: d.HeldRetry,
		admin: d.Admin, issued: d.Issued, ledger: d.Ledger, history: d.History, calibration: d.Calibration, callers: auth.NewCallers(), tracer: d.Tracer, journal: d.Journal,
		breakers: d.Breakers, health: d.Health, alerts: d.Alerts, storeBudget: redisconn.IsRedis(d.Config.Ratelimit.Store),
		window: reqlog.NewWindow(d.Config.ModelIDs())}
	// The health window hears of every finished request before the other observers; the
	// background jobs report through the same hooks, so their calls count too.
	s.hooks = s.window.Observing(d.Hooks, s.now)
	if s.health == nil && s.breakers != nil {
		s.health = s.breakers // never a nil *Set inside a non-nil interface
	}
	if s.calibration == nil {
		s.calibration = calibration.New(nil, d.Now, d.Logger) // this process only
	}
	s.settler = accounting.Settler{Log: d.Logger, Ledger: d.Ledger, History: d.History, Calibration: s.calibration}
	var err error
	if s.keeper, err = s.newKeeper(d.Config); err != nil {
		return nil, err
	}
	s.bg = jobs.New(jobs.Options{Store: d.Store, Logger: d.Logger, Now: d.Now, Hooks: s.hooks, Lease: d.BackgroundLease})
	s.owners = s.sidecarOwners()
	s.bg.ReapOrphans(s.keeper)
	s.Reload(d.Config, d.Auth)
	s.kept = s.storedService()
	s.engine = s.routes(d.MetricsHandler)
	s.sockets = newSockets(s, d.Config)
	s.ready.Store(true)
	return s, nil
}

func newState(cfg *config.Config, a *auth.Authenticator) *state {
	models := newModelTable(cfg.Models)
	models.refuseUnlisted = cfg.RefusesUnlisted()
	return &state{cfg: cfg, auth: a, models: models, prices: billing.NewPrices(cfg), tagKeys: cfg.SortedTagKeys()}
}

// withGateway gives st the platform calls of its config. Pools belong to one loaded config,
// so a reload puts every key back in service.
func (s *Server) withGateway(st *state) *state {
	deps := upstream.Deps{Platform: s.platform, Tracer: s.tracer, Log: s.log, Now: s.now}
	if s.breakers.Enabled() {
		deps.Health = s.breakers // never a nil *Set inside a non-nil interface
	}
	st.gateway = upstream.New(deps, st.cfg, st.auth.Mode() == auth.ModeKeys)
	st.server = s
	return st
}

// Reload swaps in a new, validated config. In-flight requests finish under the old one;
// limiter counters are keyed by team and key name, so keys that still exist keep their state.
func (s *Server) Reload(cfg *config.Config, a *auth.Authenticator) {
	if s.issued != nil {
		a.UseIssued(s.issued) // before the authenticator is published
	}
	st := newState(cfg, a)
	st.health = s.health
	s.window.SetModels(cfg.ModelIDs())
	s.st.Store(s.withGateway(s.withKeeper(st)))
}

// CheckReload reports why cfg cannot replace the serving config although it is valid on its
// own: a config key named like a live issued key of the same team.
func (s *Server) CheckReload(cfg *config.Config) error {
	if s.issued == nil {
		return nil
	}
	return s.issued.Clash(cfg)
}

// State returns the config and authenticator serving now, for the admin API.
func (s *Server) State() (*config.Config, *auth.Authenticator) {
	st := s.state()
	return st.cfg, st.auth
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

// SetReady reports platform reachability to /readyz.
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

// StartDrain makes new requests fail with 503 while in-flight ones finish.
func (s *Server) StartDrain() { s.draining.Store(true) }

// DrainSockets lets the WebSocket turns in flight finish, refuses new ones, and closes every
// connection (code 1012), returning once all are closed or ctx ends. The HTTP server's
// Shutdown does not see them: their connections were hijacked from it.
func (s *Server) DrainSockets(ctx context.Context) { s.sockets.Drain(ctx) }

// WaitSettled waits until every admitted request has settled or ctx ends, and reports
// whether all have. After the HTTP server closed its connections, handlers still running end
// quickly (their client and upstream calls are cancelled) and settle what they used; the
// limiter must stay open until they have.
func (s *Server) WaitSettled(ctx context.Context) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.limiter.Open() > 0 {
		select {
		case <-ctx.Done():
			return s.limiter.Open() == 0
		case <-t.C:
		}
	}
	return true
}

func (s *Server) state() *state { return s.st.Load() }

// newEngine is a gin engine routing on the decoded path with no fix-ups: an encoded slash in
// an id can never reach a different route, and no redirect answers on our behalf.
func newEngine() *gin.Engine {
	e := gin.New()
	e.UseRawPath = false
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	e.ContextWithFallback = true
	return e
}

func (s *Server) routes(metrics http.Handler) *gin.Engine {
	e := newEngine()

	// Browser apps on server.cors_origins may read the server's own answer headers too.
	allowCORS := cors.New(func() []string { return s.state().cfg.Server.CORSOrigins },
		[]string{overhead.Header, clampedHeader, servedModelHeader, droppedToolsHeader},
		func(c *gin.Context) { info(c).Route = cors.PreflightRoute })
	e.Use(s.observe, s.recoverer, allowCORS.Handle)
	e.NoRoute(s.noRoute)

	s.probes().Mount(e, metrics)

	v1 := e.Group("/v1", s.markModelsShape, s.refuseWhileDraining, s.authenticate)
	// Routes with a body are checked against the limiter before the body is read; those
	// that read kept records are refused when the caller is out of requests.
	v1.POST("/responses", s.admitEarly("/v1/responses"), s.responses)
	v1.GET("/responses", s.responsesSocket)
	v1.POST("/chat/completions", s.admitEarly("/v1/chat/completions"), s.chatCompletions)
	catalog := s.modelCatalog()
	v1.GET("/models", catalog.List)
	v1.GET("/models/:id", catalog.Get)
	v1.GET("/responses/:id", s.checkLookup("/v1/responses/{id}"), s.kept.Get)
	v1.DELETE("/responses/:id", s.checkLookup("/v1/responses/{id}"), s.kept.Delete)
	v1.GET("/responses/:id/input_items", s.checkLookup("/v1/responses/{id}/input_items"), s.kept.InputItems)
	v1.POST("/responses/:id/cancel", s.checkLookup("/v1/responses/{id}/cancel"), s.kept.Cancel)
	v1.POST("/responses/compact", s.admitEarly(compactRoute), s.compact)
	v1.POST("/responses/input_tokens", s.checkLookup(inputTokensRoute), s.inputTokens)
	s.geminiV1Routes(v1, catalog)

	// Anthropic's Messages API: the same checks as /v1, answered in Anthropic's shape.
	msgs := e.Group("/v1/messages", s.markAnthropic, s.refuseWhileDraining, s.authenticate)
	msgs.POST("", s.admitEarly(messagesRoute), s.messages)
	msgs.POST("/count_tokens", s.checkLookup(messagesRoute+"/count_tokens"), s.countTokens)

	// The Gemini API (issue 43): the same checks again, answered in Google's shape.
	s.geminiRoutes(e.Group("/v1beta", apierr.MarkGoogle, s.refuseWhileDraining, s.authenticate), catalog)

	s.sidecarRoutes(e, s.owners)
	s.adminRoutes(e)
	return e
}

func (s *Server) noRoute(c *gin.Context) {
	info(c).Route = "unknown"
	switch path := c.Request.URL.Path; {
	case strings.HasPrefix(path, "/v1/messages/"):
		s.markAnthropic(c) // an Anthropic client's 404 in its own shape
	case strings.HasPrefix(path, "/v1beta/"):
		apierr.MarkGoogle(c) // a Gemini client's, its query key taken out of the URL first
	}
	if sidecar.IsPath(c.Request.URL.Path) {
		apierr.AbortEnvelope(c, http.StatusNotFound, platform.CodeBusiness, "not found")
		return
	}
	// A known caller's 404 carries its rate-limit headers like every other /v1 answer; an
	// unknown one still gets 404, not 401, so routes cannot be probed for auth.
	if p, err := s.state().auth.Authenticate(authorization(c)); err == nil {
		info(c).principal = p
	}
	apierr.NotFound(c)
}

// recoverer turns a handler panic into a 500 (if nothing was written yet) and a log line,
// instead of a dropped connection with no trace. http.ErrAbortHandler is re-raised: it is
// how a handler deliberately aborts a response it can no longer finish cleanly.
//
// Its deferred call also gives back the room the request's body held, whatever way the
// handler ended (an aborted answer too): the request's end is the last point it may hold it.
func (s *Server) recoverer(c *gin.Context) {
	defer func() {
		info(c).held.Release()
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.log.Error("handler panic", slog.String("request_id", info(c).RequestID), slog.Any("panic", r))
			if !c.Writer.Written() {
				abortError(c, http.StatusInternalServerError, typeServer, "internal_error", "", "internal error")
			}
		}
	}()
	c.Next()
}

func (s *Server) refuseWhileDraining(c *gin.Context) {
	if s.draining.Load() {
		c.Header("Connection", "close")
		abortError(c, http.StatusServiceUnavailable, typeServer, "shutting_down", "", "modelgate is shutting down; retry on another instance")
	}
}

// probes are /healthz, /readyz and /metrics over this server's readiness (probes).
func (s *Server) probes() *probes.Probes {
	return &probes.Probes{
		Ready: func() bool {
			return !s.draining.Load() && s.ready.Load() && s.state().gateway.TeamWithoutKeys() == ""
		},
		OpenBreakers: s.breakers.OpenCount,
		Degraded:     s.writes.Degraded,
		MetricsToken: func() string { return s.state().cfg.Metrics.BearerToken },
		Route:        func(c *gin.Context, route string) { info(c).Route = route },
	}
}

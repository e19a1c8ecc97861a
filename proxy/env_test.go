package proxy

import (
	"bytes"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/breaker"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/journal"
	"modelgate/platform"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/store"
	"modelgate/testclock"
	"modelgate/tracing"
	"modelgate/upstream"
)

// testEnv is a modelgate Server in front of a simulated platform, both on loopback.
type testEnv struct {
	sim     *platformsim.Sim
	simSrv  *httptest.Server
	server  *Server
	front   *httptest.Server
	logs    *apitest.SyncBuffer // log output of concurrent handlers
	canary  string              // the platform key: must never be seen outside
	cfg     *config.Config
	limiter *ratelimit.Limiter
}

const (
	keyAlpha1 = "mg-alpha-key-1"
	keyAlpha2 = "mg-alpha-key-2"
	keyBeta   = "mg-beta-key-1"
	keyAdmin  = "mg-admin-key"
)

// baseYAML is a keys-mode config; ${CANARY} is the platform key and the two URLs point at the
// simulated platform.
const baseYAML = apitest.SimUpstreamYAML + `models:
  - id: gpt-4o-mini
    upstream: sim-chat
  - id: sim-chat
  - id: sim-tools
  - id: sim-long
  - id: sim-slow
` + alphaTeamYAML + `  - name: beta
    models: [sim-chat]
    keys:
      - name: beta-1
        key: mg-beta-key-1
admin_keys: [mg-admin-key]
`

// alphaTeamYAML starts a config's teams with team alpha and its two config keys, unlimited.
const alphaTeamYAML = `teams:
  - name: alpha
    keys:
      - name: alpha-1
        key: mg-alpha-key-1
      - name: alpha-2
        key: mg-alpha-key-2
`

// betaTeamYAML ends a config's teams with team beta, its one config key, and the admin key.
const betaTeamYAML = `  - name: beta
    keys:
      - name: beta-1
        key: mg-beta-key-1
admin_keys: [mg-admin-key]
`

// newTestEnv starts the simulated platform and modelgate with yamlText (baseYAML when empty).
// mutate may adjust the parsed config before the server is built.
func newTestEnv(t testing.TB, yamlText string, mutate func(*config.Config)) *testEnv {
	t.Helper()
	return startEnv(t, envOptions{yaml: yamlText, mutate: mutate})
}

// dialFunc is what modelgate's upstream transport dials with.
type dialFunc = platform.DialFunc

// envOptions shape a test environment.
type envOptions struct {
	yaml     string                       // baseYAML when empty; ${SIM_URL} and ${CANARY} are set
	vars     map[string]string            // more ${VAR}s for yaml
	simKeys  []string                     // platform keys the sim accepts besides the canary
	mutate   func(*config.Config)         // adjusts the parsed config
	wrapDial func(next dialFunc) dialFunc // interposes on modelgate's upstream dials
	// upstream, when set, serves the platform instead of the env's own Sim (which then
	// only provides the canary).
	upstream http.Handler
	// h2c serves the platform as cleartext HTTP/2 only, and modelgate speaks it
	// (upstream.http2: h2c): many streams on one connection.
	h2c bool
	// tlsH2 serves the platform over TLS with HTTP/2 offered by ALPN, with a certificate
	// modelgate's transport trusts (upstream.http2 auto, as production talks to the
	// platform).
	tlsH2 bool
	// limiterNow is the limiter's clock; default testclock.Running.
	limiterNow func() time.Time
	// now is the server's clock (caches, asset expiry); default testclock.Running.
	now func() time.Time
	// store is the server's record store; nil leaves the server without one.
	store store.Store
	// heldResponses and heldRetry are Deps.HeldResponses and HeldRetry; 0: the defaults.
	heldResponses int64
	heldRetry     time.Duration
	// limiterStore is the limiter's store; default memory.
	limiterStore string
	// limiter, when set, is the limiter's store options instead of the memory store
	// (Logger and Now are filled in).
	limiter *ratelimit.Options
	// tracer traces the server's requests; nil is tracing off.
	tracer *tracing.Tracer
	// hooks observe the server's requests, as the metrics do.
	hooks reqlog.Hooks
	// bgLease is background jobs' claim lease; 0 is the default.
	bgLease time.Duration
	// calibration is the server's calibration table; nil: the server's own.
	calibration *calibration.Table
	// ledger and history are the spend budgets and the usage history; nil leaves the
	// server without them.
	ledger  *billing.Ledger
	history *billing.Recorder
	// simCounter counts the input tokens the platform bills; nil: modelgate's own estimate.
	simCounter platformsim.InputCounter
	// breakers are the server's circuit breakers; nil: none.
	breakers *breaker.Set
	// alerts is what /admin/usage shows of the alerts; nil: none.
	alerts AlertsView
	// health is the breakers' view routes and fallbacks consult; nil: the breakers'.
	health upstream.Health
	// journal keeps the server's admitted calls; nil: none.
	journal *journal.Journal
	// wrapUpstream interposes on the platform's handler (the env's Sim or upstream).
	wrapUpstream func(http.Handler) http.Handler
}

// startEnv builds a testEnv. Every environment checks, when the test ends, that the platform
// key never reached a log line and that no handler panicked.
func startEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	env := &testEnv{canary: apitest.Canary(t), logs: &apitest.SyncBuffer{}}
	env.sim = platformsim.New(platformsim.Options{APIKeys: append([]string{env.canary}, o.simKeys...), Counter: o.simCounter})
	var upstream http.Handler = env.sim
	if o.upstream != nil {
		upstream = o.upstream
	}
	if o.wrapUpstream != nil {
		upstream = o.wrapUpstream(upstream)
	}
	env.simSrv = httptest.NewUnstartedServer(upstream)
	if o.h2c {
		env.simSrv.Config.Protocols = new(http.Protocols)
		env.simSrv.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	var rootCAs *x509.CertPool
	if o.tlsH2 {
		rootCAs = startTLSH2(env.simSrv)
	} else {
		env.simSrv.Start()
	}
	t.Cleanup(env.simSrv.Close)
	t.Cleanup(env.sim.Close) // runs first: releases stalled handlers so the server can close
	yamlText := o.yaml
	if yamlText == "" {
		yamlText = baseYAML
	}
	vars := map[string]string{"SIM_URL": env.simSrv.URL, "CANARY": env.canary}
	for k, v := range o.vars {
		vars[k] = v
	}
	cfg, err := config.Parse([]byte(yamlText), "test.yaml", func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if o.h2c {
		cfg.Upstream.HTTP2 = config.HTTP2Cleartext
	}
	if o.mutate != nil {
		o.mutate(cfg)
	}
	env.cfg = cfg
	a, err := auth.New(cfg)
	if err != nil {
		t.Fatalf("auth: %v", err)
	}
	tr := platform.NewTransport(platform.TransportOptions{
		DialTimeout: cfg.Upstream.DialTimeout, ResponseHeaderTimeout: cfg.Upstream.ResponseHeaderTimeout,
		HTTP2: cfg.Upstream.HTTP2, RootCAs: rootCAs, WrapDial: o.wrapDial,
	})
	t.Cleanup(tr.CloseIdleConnections)
	pc, err := platform.New(cfg.Upstream.GatewayURL, cfg.Upstream.BaseURL, tr)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lo := ratelimit.Options{Store: "memory"}
	if o.limiter != nil {
		lo = *o.limiter
	}
	if o.limiterStore != "" {
		lo.Store = o.limiterStore
	}
	// Unless a test sets its own, the clocks run from testclock's origin, so a shifted run
	// (.ci/flakes) puts every budget day and minute where it asks.
	clock := testclock.Running()
	if o.limiterNow == nil {
		o.limiterNow = clock
	}
	if o.now == nil {
		o.now = clock
	}
	lo.Logger, lo.Now = logger, o.limiterNow
	env.limiter, err = ratelimit.New(lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.limiter.Close() })
	env.server, err = New(Deps{Config: cfg, Auth: a, Limiter: env.limiter, Platform: pc, Logger: logger, Now: o.now, Store: o.store, Tracer: o.tracer, Hooks: o.hooks, BackgroundLease: o.bgLease,
		Ledger: o.ledger, History: o.history, Calibration: o.calibration, Breakers: o.breakers, Health: o.health, Alerts: o.alerts, Journal: o.journal,
		HeldResponses: o.heldResponses, HeldRetry: o.heldRetry})
	if err != nil {
		t.Fatal(err)
	}
	env.front = httptest.NewServer(env.server.Handler())
	t.Cleanup(env.front.Close)
	t.Cleanup(func() {
		env.assertNoCanary(t)
		if strings.Contains(env.logs.String(), "handler panic") {
			t.Errorf("a handler panicked: %s", env.logs.String())
		}
	})
	return env
}

// startTLSH2 starts srv on TLS offering HTTP/2 by ALPN, with httptest's own certificate,
// and returns a pool that trusts that certificate alone.
func startTLSH2(srv *httptest.Server) *x509.CertPool {
	srv.EnableHTTP2 = true
	srv.StartTLS()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return roots
}

// assertNoCanary fails the test if the platform key shows up in any log line.
func (env *testEnv) assertNoCanary(t testing.TB) {
	if strings.Contains(env.logs.String(), env.canary) {
		t.Errorf("platform key found in logs")
	}
}

// do sends a request with key as bearer token and returns status, headers and body.
func (env *testEnv) do(t testing.TB, method, path, key string, body []byte, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	status, h, b := apitest.Do(t, method, env.front.URL+path, key, bytes.NewReader(body), hdr...)
	env.assertCanaryAbsent(t, h, b)
	return status, h, b
}

// teamYAML is one team of a test config's teams list: its settings (fields of a team, one a
// line, as "limits: {tokens_per_day: 150}") and its one key, <name>-1, mg-<name>-key-1.
func teamYAML(name string, settings ...string) string {
	s := "  - name: " + name + "\n"
	for _, line := range settings {
		s += "    " + line + "\n"
	}
	return s + "    keys:\n      - {name: " + name + "-1, key: mg-" + name + "-key-1}\n"
}

// post sends body to path with key (and hdr), and fails the test unless the answer's status
// is want; it returns the answer's headers and body.
func (env *testEnv) post(t testing.TB, path, key string, body []byte, want int, hdr ...string) (http.Header, []byte) {
	t.Helper()
	status, h, b := env.do(t, "POST", path, key, body, hdr...)
	if status != want {
		t.Fatalf("POST %s: status %d, want %d: %s", path, status, want, b)
	}
	return h, b
}

func (env *testEnv) assertCanaryAbsent(t testing.TB, h http.Header, body []byte) {
	t.Helper()
	if bytes.Contains(body, []byte(env.canary)) {
		t.Errorf("platform key found in a response body")
	}
	for name, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, env.canary) {
				t.Errorf("platform key found in response header %s", name)
			}
		}
	}
}

// upstreamCalls counts the simulated platform's recorded requests.
func (env *testEnv) upstreamCalls() int { return len(env.sim.Requests()) }

func mustClient(t testing.TB, url string) *platform.Client {
	t.Helper()
	c, err := platform.New(url, url, platform.NewTransport(platform.TransportOptions{DialTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tempBolt opens an embedded record store in the test's temporary directory, closed when the
// test ends.
func tempBolt(t testing.TB, o store.BoltOptions) *store.Bolt {
	t.Helper()
	st, err := store.OpenBolt(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/admin"
	"modelgate/apitest"
	"modelgate/audit"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/breaker"
	"modelgate/config"
	"modelgate/platform"
	"modelgate/platformsim"
	"modelgate/proxy"
	"modelgate/ratelimit"
	"modelgate/store"
	"modelgate/testclock"
)

const (
	adminKey = "mg-admin-key-for-tests"
	alphaKey = "mg-alpha-config-key"
	betaKey  = "mg-beta-config-key"
)

// testYAML has two teams with config keys, priced models and an admin key.
const testYAML = apitest.SimUpstreamYAML + `models:
  - id: sim-chat
    price: {input: 1.0, cached_input: 0.5, output: 4.0}
  - id: sim-long
    price: {input: 2.0, output: 8.0}
pricing:
  currency: EUR
teams:
  - name: alpha
    limits: {requests_per_minute: 1000}
    keys:
      - name: alpha-cfg
        key: mg-alpha-config-key
  - name: beta
    keys:
      - name: beta-cfg
        key: mg-beta-config-key
admin_keys: [mg-admin-key-for-tests]
`

// replica is one modelgate (proxy, admin API, spend ledger, history) over a store, with
// its loops running as main runs them.
type replica struct {
	front   *httptest.Server
	srv     *proxy.Server
	api     *admin.API
	st      store.Store
	ledger  *billing.Ledger
	history *billing.Recorder
	stop    func()
	logs    *apitest.SyncBuffer
	now     func() time.Time // the clock of everything but the limiter, when the test set none
}

type envOptions struct {
	yaml     string
	storeURL string // "redis://..." or "" for bolt in dataDir
	dataDir  string
	mutate   func(*config.Config)
	sim      *httptest.Server
	now      func() time.Time // clock of keys, ledger, history and server; default testclock.Running
	// limiterNow is the limiter's clock; default now's. A test that reads "this minute"
	// figures gives one that cannot cross a minute boundary while it runs.
	limiterNow func() time.Time
	// breakers are the server's circuit breakers; nil: none.
	breakers *breaker.Set
	// keyEvents hears of keys issued and revoked; nil: nobody.
	keyEvents admin.KeyEvents
	// alerts builds what /admin/usage shows of the alerts over the replica's store; nil: none.
	alerts func(st store.Store, now func() time.Time) proxy.AlertsView
	// maxTeams caps the runtime teams; 0: admin.MaxRuntimeTeams.
	maxTeams int
	// pollEvery is how often the replica polls the store for keys and teams; 0: the default.
	pollEvery time.Duration
}

// simPlatformKey is the platform key the simulated platform accepts and the config uses.
const simPlatformKey = "sk-platform-test"

// newSim starts a simulated platform accepting the test's platform key.
func newSim(t testing.TB) *httptest.Server {
	t.Helper()
	sim := platformsim.New(platformsim.Options{APIKeys: []string{simPlatformKey}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	return srv
}

func startReplica(t testing.TB, o envOptions) *replica {
	t.Helper()
	if o.sim == nil {
		o.sim = newSim(t)
	}
	if o.yaml == "" {
		o.yaml = testYAML
	}
	if o.dataDir == "" && o.storeURL == "" {
		o.dataDir = t.TempDir()
	}
	cfg, err := config.Parse([]byte(o.yaml), "test.yaml", func(name string) (string, bool) {
		switch name {
		case "SIM_URL":
			return o.sim.URL, true
		case "CANARY":
			return simPlatformKey, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.mutate != nil {
		o.mutate(cfg)
	}
	authn, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &apitest.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	// One clock, running from testclock's origin unless the test sets its own, so a shifted
	// run (.ci/flakes) moves every day these figures are kept by.
	if o.now == nil {
		o.now = testclock.Running()
	}
	if o.limiterNow == nil {
		o.limiterNow = o.now
	}
	limiter, err := ratelimit.New(ratelimit.Options{Store: "memory", Logger: logger, Now: o.limiterNow})
	if err != nil {
		t.Fatal(err)
	}
	rl := config.Ratelimit{Store: o.storeURL, DataPath: o.dataDir}
	if rl.Store == "" {
		rl.Store = "memory"
	}
	st, err := store.Open(rl, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{st: st, logs: logs, now: o.now}
	ctx := context.Background()
	if r.ledger, err = billing.NewLedger(ctx, st, o.now, logger); err != nil {
		t.Fatal(err)
	}
	r.history = billing.NewRecorder(st, cfg.UsageHistory.Retention, o.now, logger)
	issued := auth.NewIssued(o.now)
	r.api, err = admin.New(admin.Deps{Store: st, Issued: issued, Limiter: limiter, Ledger: r.ledger, History: r.history,
		Audit: audit.New(st, o.now), Logger: logger, Now: o.now, KeyEvents: o.keyEvents, MaxTeams: o.maxTeams, PollEvery: o.pollEvery, State: func() (*config.Config, *auth.Authenticator) { return r.srv.State() }})
	if err != nil {
		t.Fatal(err)
	}
	var alertsView proxy.AlertsView
	if o.alerts != nil {
		alertsView = o.alerts(st, o.now)
	}
	pc, err := platform.New(cfg.Upstream.GatewayURL, cfg.Upstream.BaseURL, platform.NewTransport(platform.TransportOptions{DialTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	r.srv, err = proxy.New(proxy.Deps{Config: cfg, Auth: authn, Limiter: limiter, Platform: pc, Logger: logger, Store: st,
		Admin: r.api, Issued: issued, Ledger: r.ledger, History: r.history, Now: o.now, Breakers: o.breakers, Alerts: alertsView})
	if err != nil {
		t.Fatal(err)
	}
	r.front = httptest.NewServer(r.srv.Handler())
	loopCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.api.Run(loopCtx) })
	wg.Go(func() { r.ledger.Run(loopCtx, 100*time.Millisecond) })
	wg.Go(func() { r.history.Run(loopCtx, 100*time.Millisecond) })
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			r.front.Close()
			cancel()
			wg.Wait()
			limiter.Close()
			st.Close()
		})
	}
	t.Cleanup(r.stop)
	return r
}

// do sends a request with key as bearer token; body is JSON-encoded unless it is a string.
func (r *replica) do(t testing.TB, method, path, key string, body any, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	return apitest.Do(t, method, r.front.URL+path, key, rd, hdr...)
}

// chat sends one small chat completion with key and returns the status.
func (r *replica) chat(t testing.TB, key string) int {
	t.Helper()
	status, _, _ := r.do(t, "POST", "/v1/chat/completions", key, map[string]any{
		"model": "sim-chat", "messages": []map[string]string{{"role": "user", "content": "hi"}}})
	return status
}

// issue creates a key through the API and returns its id and secret.
func (r *replica) issue(t testing.TB, team, name string, extra map[string]any) (id, secret string) {
	t.Helper()
	body := map[string]any{"team": team, "name": name}
	for k, v := range extra {
		body[k] = v
	}
	status, _, b := r.do(t, "POST", "/admin/keys", adminKey, body)
	if status != http.StatusCreated {
		t.Fatalf("issue %s/%s: %d %s", team, name, status, b)
	}
	var out struct{ ID, Key string }
	if err := json.Unmarshal(b, &out); err != nil || out.ID == "" || out.Key == "" {
		t.Fatalf("issue answer %s: %v", b, err)
	}
	return out.ID, out.Key
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// getAdmin GETs path on r with the admin key, fails t unless it is answered 200, and
// decodes the answer as a T.
func getAdmin[T any](t testing.TB, r *replica, path string) T {
	t.Helper()
	status, _, b := r.do(t, "GET", path, adminKey, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, b)
	}
	return decode[T](t, b)
}

package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/platform"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/testclock"
)

// fakePlatform answers each call by the key it came with: the status listed for that key,
// 200 otherwise. It records the keys in the order the calls came.
type fakePlatform struct {
	mu     sync.Mutex
	status map[string][]int // key -> statuses for its next calls; an empty list means 200
	header http.Header      // sent with every non-2xx answer
	seen   []string
}

func (f *fakePlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	f.seen = append(f.seen, key)
	code := http.StatusOK
	if list := f.status[key]; len(list) > 0 {
		code, f.status[key] = list[0], list[1:]
	}
	f.mu.Unlock()
	if code != http.StatusOK {
		for k, vs := range f.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"error":{"message":"refused by the platform","type":"server_error","code":"busy"}}`)
		return
	}
	_, _ = io.WriteString(w, `{"id":"resp_1","status":"completed"}`)
}

func (f *fakePlatform) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

type gatewayEnv struct {
	gw    *Gateway
	fake  *fakePlatform
	clock *testclock.Clock
	logs  *bytes.Buffer
	waits []time.Duration // the retry waits the policy chose
}

// newGatewayEnv builds a Gateway over a fake platform for team alpha, whose callers share
// poolKeys (none: each caller brings its own key).
func newGatewayEnv(t *testing.T, poolKeys ...string) *gatewayEnv {
	t.Helper()
	return newGatewayEnvWith(t, nil, nil, poolKeys...)
}

// newGatewayEnvWith is newGatewayEnv with circuit breakers (health) and configured upstream
// models.
func newGatewayEnvWith(t *testing.T, health Health, models []string, poolKeys ...string) *gatewayEnv {
	t.Helper()
	env := &gatewayEnv{fake: &fakePlatform{status: map[string][]int{}}, clock: testclock.At(time.Unix(1_700_000_000, 0)), logs: &bytes.Buffer{}}
	srv := httptest.NewServer(env.fake)
	t.Cleanup(srv.Close)
	client, err := platform.New(srv.URL, srv.URL, srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Upstream: config.Upstream{RequestTimeout: 5 * time.Second},
		Teams: []config.Team{{Name: "alpha", UpstreamAPIKeys: poolKeys, Keys: []config.Key{{Name: "alpha-1"}}}}}
	for _, m := range models {
		cfg.Models = append(cfg.Models, config.Model{ID: m, Upstream: m})
	}
	log := slog.New(slog.NewTextHandler(env.logs, nil))
	gw := New(Deps{Platform: client, Log: log, Now: env.clock.Now, Health: health}, cfg, len(poolKeys) > 0)
	p := gw.Policy()
	p.Jitter = func() float64 { return 0 }
	p.Sleep = func(_ context.Context, d time.Duration) error { env.waits = append(env.waits, d); return nil }
	env.gw = gw.WithPolicy(p)
	if pool := env.gw.Pool("alpha"); pool != nil {
		pool.BreakTiesWith(func(int) int { return 0 })
	}
	return env
}

var alice = &auth.Principal{Team: "alpha", KeyName: "alpha-1", PlatformKey: auth.Secret("sk-alice")}

func (env *gatewayEnv) open(t *testing.T) (*http.Response, *Failure, int) {
	t.Helper()
	attempts := 0
	resp, cancel, f := env.gw.Open(t.Context(), &Call{Principal: alice, Body: []byte(`{}`), Trail: Trail{RequestID: "req-1", Attempts: &attempts}})
	if f == nil {
		t.Cleanup(func() { resp.Body.Close(); cancel() })
	}
	return resp, f, attempts
}

func TestGatewayOpen(t *testing.T) {
	tests := []struct {
		name         string
		pool         []string
		status       map[string][]int
		wantKeys     string // the keys the platform saw, in order
		wantFailure  string // Failure.Kind; "" is a 2xx answer
		wantStatus   int    // the client's status on failure
		wantWaits    int
		wantLogAbout string
	}{
		{name: "caller_key", wantKeys: "sk-alice"},
		{name: "retry_503_then_ok", status: map[string][]int{"sk-alice": {503}}, wantKeys: "sk-alice sk-alice", wantWaits: 1},
		{name: "retries_exhausted", status: map[string][]int{"sk-alice": {503, 503, 503}}, wantKeys: "sk-alice sk-alice sk-alice",
			wantFailure: "status_5xx", wantStatus: 503, wantWaits: 2},
		{name: "500_not_retried", status: map[string][]int{"sk-alice": {500}}, wantKeys: "sk-alice", wantFailure: "status_5xx", wantStatus: 500},
		{name: "pool_first_key", pool: []string{"sk-a", "sk-b"}, wantKeys: "sk-a"},
		{name: "rejected_key_fails_over_at_once", pool: []string{"sk-a", "sk-b"}, status: map[string][]int{"sk-a": {401}}, wantKeys: "sk-a sk-b",
			wantLogAbout: "taken out of service"},
		{name: "every_key_rejected", pool: []string{"sk-a", "sk-b"}, status: map[string][]int{"sk-a": {401}, "sk-b": {403}}, wantKeys: "sk-a sk-b",
			wantFailure: "upstream_auth", wantStatus: 502, wantLogAbout: "rejected the configured platform key"},
		{name: "limited_key_fails_over", pool: []string{"sk-a", "sk-b"}, status: map[string][]int{"sk-a": {429}}, wantKeys: "sk-a sk-b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newGatewayEnv(t, tt.pool...)
			for k, v := range tt.status {
				env.fake.status[k] = v
			}
			resp, f, attempts := env.open(t)
			if got := strings.Join(env.fake.keys(), " "); got != tt.wantKeys {
				t.Errorf("platform saw keys %q, want %q", got, tt.wantKeys)
			}
			if attempts != len(env.fake.keys()) {
				t.Errorf("trail counted %d attempts, platform saw %d", attempts, len(env.fake.keys()))
			}
			if len(env.waits) != tt.wantWaits {
				t.Errorf("waited %d times (%v), want %d", len(env.waits), env.waits, tt.wantWaits)
			}
			switch {
			case tt.wantFailure == "" && f != nil:
				t.Fatalf("failure %+v, want an answer", f)
			case tt.wantFailure == "" && resp.StatusCode != http.StatusOK:
				t.Fatalf("status %d", resp.StatusCode)
			case tt.wantFailure != "" && (f == nil || f.Kind != tt.wantFailure || f.Status != tt.wantStatus):
				t.Fatalf("failure %+v, want kind %s status %d", f, tt.wantFailure, tt.wantStatus)
			case f != nil && !json.Valid(f.Body):
				t.Fatalf("failure body is not JSON: %s", f.Body)
			}
			if !strings.Contains(env.logs.String(), tt.wantLogAbout) {
				t.Errorf("log lacks %q:\n%s", tt.wantLogAbout, env.logs)
			}
			for _, k := range tt.pool {
				if strings.Contains(env.logs.String(), k) || (f != nil && bytes.Contains(f.Body, []byte(k))) {
					t.Errorf("platform key %s leaked into a log or an answer", k)
				}
			}
		})
	}
}

// A refusal's advice on retrying reaches the client with the platform's error, in OpenAI's shape.
func TestGatewayStatusFailureKeepsRetryAdvice(t *testing.T) {
	env := newGatewayEnv(t)
	env.fake.status["sk-alice"] = []int{409}
	env.fake.header = http.Header{"Retry-After": {"7"}, "X-Should-Retry": {"false"}, "X-Internal": {"no"}}
	_, f, _ := env.open(t)
	if f == nil || f.Status != 409 || f.Header.Get("Retry-After") != "7" || f.Header.Get("X-Should-Retry") != "false" || f.Header.Get("X-Internal") != "" {
		t.Fatalf("failure %+v", f)
	}
	var body struct {
		Error struct{ Message, Code string }
	}
	if err := json.Unmarshal(f.Body, &body); err != nil || body.Error.Message != "refused by the platform" || body.Error.Code != "busy" {
		t.Fatalf("body %s (%v)", f.Body, err)
	}
}

// A platform that cannot be reached: retried by the policy, answered 502, and never billed,
// since no request left.
func TestGatewayUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	client, err := platform.New(addr, addr, platform.NewTransport(platform.TransportOptions{DialTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(Deps{Platform: client}, &config.Config{Upstream: config.Upstream{RequestTimeout: 5 * time.Second}}, false)
	var waits atomic.Int32
	p := gw.Policy()
	p.Sleep = func(context.Context, time.Duration) error { waits.Add(1); return nil }
	attempts := 0
	_, _, f := gw.WithPolicy(p).Open(t.Context(), &Call{Principal: alice, Body: []byte(`{}`), Trail: Trail{Attempts: &attempts}})
	if f == nil || f.Status != http.StatusBadGateway || f.Kind != "dial" || f.MaybeBilled || f.ClientGone {
		t.Fatalf("failure %+v", f)
	}
	if attempts != 3 || waits.Load() != 2 {
		t.Errorf("%d attempts and %d waits, want 3 and 2", attempts, waits.Load())
	}
}

// A caller that leaves is no one to answer, and a request the platform received whole may
// have been billed.
func TestGatewayCallerGoneMaybeBilled(t *testing.T) {
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read to the end: only then does the server notice the caller hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	client, err := platform.New(srv.URL, srv.URL, srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	gw := New(Deps{Platform: client}, &config.Config{Upstream: config.Upstream{RequestTimeout: 5 * time.Second}}, false)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-arrived; cancel() }()
	_, _, f := gw.Open(ctx, &Call{Principal: alice, Body: []byte(`{}`)})
	if f == nil || !f.ClientGone || !f.MaybeBilled || f.Kind != "canceled" {
		t.Fatalf("failure %+v", f)
	}
}

// The errors modelgate states itself are OpenAI error objects with a code a client can act on.
func TestTransportFailureBodies(t *testing.T) {
	for _, err := range []error{context.DeadlineExceeded, &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "refused"}}} {
		f := TransportFailure(err)
		var body struct {
			Error struct {
				Message, Type string
				Param, Code   *string
			}
		}
		if e := json.Unmarshal(f.Body, &body); e != nil || body.Error.Type != "server_error" || body.Error.Code == nil || body.Error.Param != nil || body.Error.Message == "" {
			t.Errorf("%v: body %s (%v)", err, f.Body, e)
		}
	}
	var auth struct{ Error struct{ Code string } }
	if err := json.Unmarshal([]byte(authBody), &auth); err != nil || auth.Error.Code != "upstream_auth_failed" {
		t.Errorf("auth body %s (%v)", authBody, err)
	}
}

// The sidecar's lease counts its key in flight until Done, and Done's answer updates the key.
func TestLenderLease(t *testing.T) {
	env := newGatewayEnv(t, "sk-a", "sk-b")
	attempts := 0
	lender := env.gw.Lender(&auth.Principal{Team: "alpha"}, Trail{Attempts: &attempts})
	_, lease := lender.Lease(t.Context())
	if lease.Key() != "sk-a" || lease.Fingerprint() != Fingerprint("sk-a") || attempts != 1 {
		t.Fatalf("lease %q %q, attempts %d", lease.Key(), lease.Fingerprint(), attempts)
	}
	if st := env.gw.Pool("alpha").States(); st[0].InFlight != 1 {
		t.Fatalf("leased key not in flight: %+v", st)
	}
	lease.Done(&http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}}, nil)
	if st := env.gw.Pool("alpha").States(); st[0].InFlight != 0 || st[0].State != reqlog.KeyOut {
		t.Fatalf("after a 401: %+v", st)
	}
	if !lender.Quoted([]byte("echo sk-b here")) || lender.Quoted([]byte("nothing")) {
		t.Error("Quoted does not see the pool's keys")
	}
	if env.gw.TeamWithoutKeys() != "" {
		t.Error("sk-b is still in service")
	}
	env.gw.Pool("alpha").observe(env.gw.Pool("alpha").keys[1], &http.Response{StatusCode: http.StatusForbidden}, nil)
	if env.gw.TeamWithoutKeys() != "alpha" {
		t.Error("every key of alpha is out, yet the team is served")
	}
}

// A failed call costs its reservation only when the platform may have billed it.
func TestFailureCharge(t *testing.T) {
	reserve := ratelimit.Usage{InputTokens: 10, OutputTokens: 100}
	if ch := (&Failure{MaybeBilled: true}).Charge(reserve); ch.Usage != reserve || ch.Unknown != accounting.NoAnswer {
		t.Errorf("maybe billed: %+v, want the reservation as an upper bound", ch)
	}
	if ch := (&Failure{}).Charge(reserve); ch != (accounting.Charge{}) {
		t.Errorf("never billed: %+v, want nothing", ch)
	}
}

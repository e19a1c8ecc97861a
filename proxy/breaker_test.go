package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/breaker"
	"modelgate/store"
	"modelgate/store/storetest"
	"modelgate/testclock"
)

// flakyPlatform answers 500 while failing is set and passes calls to next otherwise. Calls
// it lets through wait for hold, when set, before reaching next. It counts every call.
type flakyPlatform struct {
	next    http.Handler
	failing atomic.Bool
	calls   atomic.Int64
	waiting atomic.Int64
	hold    chan struct{}
}

func (f *flakyPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if f.failing.Load() {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"the model fell over","type":"server_error","code":"internal"}}`))
		return
	}
	if f.hold != nil {
		f.waiting.Add(1)
		<-f.hold
	}
	f.next.ServeHTTP(w, r)
}

// startFlakyBreakerEnv serves yaml (baseYAML when "") with a breaker set of the given
// failures per minute and cool-down on the test's clock, in front of a flakyPlatform that
// passes to the env's Sim until it is told to fail.
func startFlakyBreakerEnv(t *testing.T, yaml string, failures int, cooldown time.Duration) (*testclock.Clock, *flakyPlatform, *testEnv) {
	t.Helper()
	clk := testclock.At(testclock.Origin())
	set := breaker.New(breaker.Options{Now: clk.Now,
		Settings: breaker.Settings{Failures: failures, Window: time.Minute, Cooldown: cooldown}})
	flaky := &flakyPlatform{}
	env := startEnv(t, envOptions{yaml: yaml, upstream: flaky, breakers: set})
	flaky.next = env.sim
	return clk, flaky, env
}

// breakerRoutes are the model routes, each with a body for model sim-chat and how its
// error shape names the breaker's refusal.
var breakerRoutes = []struct {
	name, path string
	body       func(stream bool) []byte
	hdr        []string
	refused    int    // the refusal's status: 503, or Anthropic's 529 overloaded
	refusal    string // a part of the refusal's body in the route's shape
}{
	{"chat", "/v1/chat/completions", func(stream bool) []byte {
		return []byte(`{"model":"sim-chat","stream":` + boolText(stream) + `,"messages":[{"role":"user","content":"hi"}]}`)
	}, nil, 503, `"code":"model_unavailable"`},
	{"messages", "/v1/messages", func(stream bool) []byte {
		return []byte(`{"model":"sim-chat","max_tokens":64,"stream":` + boolText(stream) + `,"messages":[{"role":"user","content":"hi"}]}`)
	}, []string{"anthropic-version", "2023-06-01"}, 529, `"type":"overloaded_error"`},
	{"responses", "/v1/responses", func(stream bool) []byte {
		return []byte(`{"model":"sim-chat","stream":` + boolText(stream) + `,"input":"hi"}`)
	}, nil, 503, `"code":"model_unavailable"`},
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// A model breaker through the proxy, on every model route, streamed and not: three 500s
// open it; then calls fail fast in the route's shape without reaching the platform; after
// the cool-down one probe goes, its success closes the breaker and calls flow again.
func TestModelBreakerOpensProbesAndCloses(t *testing.T) {
	for _, rt := range breakerRoutes {
		for _, stream := range []bool{false, true} {
			t.Run(rt.name+"/stream="+boolText(stream), func(t *testing.T) {
				clk, flaky, env := startFlakyBreakerEnv(t, "", 3, 30*time.Second)
				call := func() (int, []byte) {
					status, _, b := env.do(t, "POST", rt.path, keyAlpha1, rt.body(stream), rt.hdr...)
					return status, b
				}
				flaky.failing.Store(true)
				for i := range 3 {
					if status, b := call(); status != http.StatusInternalServerError {
						t.Fatalf("failure %d: %d %s", i+1, status, b)
					}
				}
				for range 5 {
					status, b := call()
					if status != rt.refused || !strings.Contains(string(b), rt.refusal) {
						t.Fatalf("with the breaker open: %d %s", status, b)
					}
				}
				if n := flaky.calls.Load(); n != 3 {
					t.Fatalf("the platform saw %d calls, want only the 3 that failed", n)
				}
				if st := breakerState(t, env, "model:sim-chat"); st != "open" {
					t.Fatalf("/admin/usage says %q", st)
				}
				if status, _, b := env.do(t, "GET", "/readyz", "", nil); status != http.StatusOK || !strings.Contains(string(b), `"breakers_not_closed":1`) {
					t.Fatalf("/readyz: %d %s", status, b)
				}

				flaky.failing.Store(false)
				clk.Advance(30 * time.Second)
				if status, b := call(); status != http.StatusOK {
					t.Fatalf("the probe: %d %s", status, b)
				}
				if st := breakerState(t, env, "model:sim-chat"); st != "closed" {
					t.Fatalf("after a good probe /admin/usage says %q", st)
				}
				for range 3 {
					if status, b := call(); status != http.StatusOK {
						t.Fatalf("after closing: %d %s", status, b)
					}
				}
			})
		}
	}
}

// Under load a half-open model breaker lets exactly one call reach the platform: the rest
// fail fast while the probe is out, and once it succeeds calls flow again.
func TestModelBreakerOneProbeUnderLoad(t *testing.T) {
	clk, flaky, env := startFlakyBreakerEnv(t, "", 2, 10*time.Second)
	body := breakerRoutes[0].body(false)
	flaky.failing.Store(true)
	for range 2 {
		env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body)
	}
	flaky.failing.Store(false)
	flaky.hold = make(chan struct{})
	clk.Advance(10 * time.Second)

	const callers = 24
	statuses := make(chan int, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			status, _, _ := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body)
			statuses <- status
		})
	}
	// Every caller but the probe is answered while the probe waits at the platform.
	deadline := time.Now().Add(10 * time.Second)
	for len(statuses) < callers-1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := flaky.waiting.Load(); got != 1 || len(statuses) != callers-1 {
		t.Fatalf("%d calls at the platform and %d answered; want 1 probe and %d refused", got, len(statuses), callers-1)
	}
	close(flaky.hold)
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[http.StatusOK] != 1 || count[http.StatusServiceUnavailable] != callers-1 {
		t.Fatalf("statuses %v: want one 200 (the probe) and %d 503s", count, callers-1)
	}
	if status, _, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body); status != http.StatusOK {
		t.Fatalf("after the probe: %d %s", status, b)
	}
}

// breakerState reads a breaker's state from /admin/usage ("closed" when it is not listed).
func breakerState(t *testing.T, env *testEnv, name string) string {
	t.Helper()
	b := adminUsage(t, env)
	var u struct {
		Breakers []struct {
			Name     string     `json:"name"`
			State    string     `json:"state"`
			Failures int        `json:"failures"`
			OpenedAt *time.Time `json:"opened_at"`
		} `json:"breakers"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	for _, br := range u.Breakers {
		if br.Name == name {
			if br.State != "closed" && br.OpenedAt == nil {
				t.Errorf("breaker %s is %s with no opened_at", name, br.State)
			}
			return br.State
		}
	}
	return "closed"
}

// A weighted route's choice asks the breaker of the model it picks; the gateway does not ask
// again, so a half-open breaker's one probe is the call the route sends, and it closes the
// breaker. (Asked twice, the probe the route took refused its own call with 503.)
func TestRoutedModelProbesItsBreaker(t *testing.T) {
	yaml := strings.Replace(baseYAML, "models:\n", "models:\n  - id: canary\n    routes: [{upstream: sim-chat, weight: 1}]\n", 1)
	clk, flaky, env := startFlakyBreakerEnv(t, yaml, 2, 10*time.Second)
	body := []byte(`{"model":"canary","messages":[{"role":"user","content":"hi"}]}`)
	flaky.failing.Store(true)
	for range 2 {
		env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body)
	}
	if got := breakerState(t, env, "model:sim-chat"); got != "open" {
		t.Fatalf("after two failures the routed model's breaker is %s", got)
	}
	flaky.failing.Store(false)
	clk.Advance(10 * time.Second)
	if status, _, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body); status != http.StatusOK {
		t.Fatalf("the probe: %d %s", status, b)
	}
	if got := breakerState(t, env, "model:sim-chat"); got != "closed" {
		t.Errorf("after the probe the breaker is %s", got)
	}
}

// Two replicas share a model breaker through one record store: failures on both add up,
// the breaker one opens fails calls fast on the other, one probe goes across both under
// load, and its success closes the breaker on both. On bbolt (two in-process replicas on
// one file, an injected clock) and on Redis (real time: Redis expires the cool-down by its
// own clock; skipped without redis-server).
func TestModelBreakerSharedByReplicas(t *testing.T) {
	const cooldown = 300 * time.Millisecond
	cases := []struct {
		name  string
		start func(t *testing.T) (st store.Store, now func() time.Time, advance func(time.Duration))
	}{
		{"bolt", func(t *testing.T) (store.Store, func() time.Time, func(time.Duration)) {
			clk := testclock.At(testclock.Origin())
			return tempBolt(t, store.BoltOptions{Now: clk.Now}), clk.Now, clk.Advance
		}},
		{"redis", func(t *testing.T) (store.Store, func() time.Time, func(time.Duration)) {
			return storetest.Redis(t), time.Now, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, now, advance := tc.start(t)
			flaky := &flakyPlatform{}
			var sets []*breaker.Set
			var envs []*testEnv
			for range 2 {
				set := breaker.New(breaker.Options{Store: st, Now: now,
					Settings: breaker.Settings{Failures: 3, Window: time.Minute, Cooldown: cooldown, MaxCooldown: time.Second}})
				sets = append(sets, set)
				envs = append(envs, startEnv(t, envOptions{upstream: flaky, breakers: set}))
			}
			// Each replica holds its own platform key, which only its own sim accepts.
			flaky.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, env := range envs {
					if r.Header.Get("Authorization") == "Bearer "+env.canary {
						env.sim.ServeHTTP(w, r)
						return
					}
				}
				http.Error(w, "unknown key", http.StatusUnauthorized)
			})
			body := breakerRoutes[0].body(false)
			call := func(env *testEnv) int {
				status, _, _ := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body)
				return status
			}

			flaky.failing.Store(true)
			for _, env := range []*testEnv{envs[0], envs[1], envs[0]} {
				if got := call(env); got != http.StatusInternalServerError {
					t.Fatalf("failure: %d", got)
				}
			}
			apitest.SyncAll(t, sets...)
			for range 4 {
				for i, env := range envs {
					if got := call(env); got != http.StatusServiceUnavailable {
						t.Fatalf("replica %d with the breaker open: %d", i+1, got)
					}
				}
			}
			if n := flaky.calls.Load(); n != 3 {
				t.Fatalf("the platform saw %d calls, want the 3 failures only", n)
			}

			flaky.failing.Store(false)
			flaky.hold = make(chan struct{})
			var release sync.Once
			releaseHeld := func() { release.Do(func() { close(flaky.hold) }) }
			// A failed check below must not leave the held call, and the test, hanging.
			t.Cleanup(releaseHeld)
			if advance != nil {
				advance(cooldown)
			} else {
				// Redis ends the cool-down by expiring its claim: wait for that, bounded.
				deadline := time.Now().Add(5 * time.Second)
				for {
					_, err := st.Get(context.Background(), "breaker_probe", "model:sim-chat")
					if errors.Is(err, store.ErrNotFound) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the cool-down did not end at Redis: %v", err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			const perReplica = 12
			statuses := make(chan int, 2*perReplica)
			var wg sync.WaitGroup
			for _, env := range envs {
				for range perReplica {
					wg.Go(func() { statuses <- call(env) })
				}
			}
			// The refused calls may all be answered while the probe is still on its way to the
			// platform: wait for both.
			deadline := time.Now().Add(10 * time.Second)
			for (len(statuses) < 2*perReplica-1 || flaky.waiting.Load() < 1) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := flaky.waiting.Load(); got != 1 || len(statuses) != 2*perReplica-1 {
				t.Fatalf("%d calls at the platform, %d answered; want 1 probe across both replicas", got, len(statuses))
			}
			releaseHeld()
			wg.Wait()
			close(statuses)
			ok := 0
			for s := range statuses {
				if s == http.StatusOK {
					ok++
				}
			}
			if ok != 1 {
				t.Fatalf("%d calls succeeded during the probe, want the probe alone", ok)
			}
			apitest.SyncAll(t, sets...)
			for i, env := range envs {
				if got := call(env); got != http.StatusOK {
					t.Fatalf("replica %d after the probe closed the breaker: %d", i+1, got)
				}
			}
		})
	}
}

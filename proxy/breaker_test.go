package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/breaker"
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
				clk := testclock.At(testclock.Origin())
				set := breaker.New(breaker.Options{Now: clk.Now,
					Settings: breaker.Settings{Failures: 3, Window: time.Minute, Cooldown: 30 * time.Second}})
				flaky := &flakyPlatform{}
				env := startEnv(t, envOptions{upstream: flaky, breakers: set})
				flaky.next = env.sim
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
	clk := testclock.At(testclock.Origin())
	set := breaker.New(breaker.Options{Now: clk.Now,
		Settings: breaker.Settings{Failures: 2, Window: time.Minute, Cooldown: 10 * time.Second}})
	flaky := &flakyPlatform{}
	env := startEnv(t, envOptions{upstream: flaky, breakers: set})
	flaky.next = env.sim
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
	status, _, b := env.do(t, "GET", "/admin/usage", keyAdmin, nil)
	if status != http.StatusOK {
		t.Fatalf("/admin/usage: %d %s", status, b)
	}
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
	clk := testclock.At(testclock.Origin())
	set := breaker.New(breaker.Options{Now: clk.Now,
		Settings: breaker.Settings{Failures: 2, Window: time.Minute, Cooldown: 10 * time.Second}})
	flaky := &flakyPlatform{}
	yaml := strings.Replace(baseYAML, "models:\n", "models:\n  - id: canary\n    routes: [{upstream: sim-chat, weight: 1}]\n", 1)
	env := startEnv(t, envOptions{yaml: yaml, upstream: flaky, breakers: set})
	flaky.next = env.sim
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

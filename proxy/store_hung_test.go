package proxy

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/redisconn"
	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/testclock"
)

// hungSlack is what a request may take beyond its store budget on a loaded machine: its own
// work and the scheduling of the test. Every store timeout in these tests is longer than the
// budget and the slack together.
const hungSlack = 2 * time.Second

// hungStoreRoutes are the model routes a hung store is tried on, each with the start of its
// error shape and the status its store refusal has (Anthropic says overloaded with 529).
var hungStoreRoutes = []struct {
	name, path, body, shape string
	denied                  int
}{
	{"chat", "/v1/chat/completions", `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, `{"error":{"message":`, http.StatusServiceUnavailable},
	{"responses", "/v1/responses", `{"model":"sim-chat","max_output_tokens":16,"input":"hi"}`, `{"error":{"message":`, http.StatusServiceUnavailable},
	{"messages", "/v1/messages", `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, `{"type":"error","error":{"type":"overloaded_error"`, 529},
}

// hungStoreEnv is modelgate in process against platformsim, its limiter and record store on
// one real redis-server sharing one store breaker whose clock stands still (no probe goes
// out while the test looks), under on_store_error policy. The stores' own timeouts are long
// (3 s for the limiter, 5 s for the record store): only the request's budget (500 ms) can
// cut a command short, so a command that escaped it would be plain to see however loaded the
// machine is.
func hungStoreEnv(t *testing.T, policy string) (*testEnv, *redistest.Server, *redisconn.Guard) {
	return hungStoreEnvWith(t, policy, nil)
}

// hungStoreEnvWith is hungStoreEnv with the platform served by upstream (nil: the sim).
func hungStoreEnvWith(t *testing.T, policy string, upstream http.Handler) (*testEnv, *redistest.Server, *redisconn.Guard) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr + "/0"
	frozen := testclock.Origin()
	guard := redisconn.NewGuard(func() time.Time { return frozen }, nil)
	rdb, err := redisconn.New(config.Ratelimit{Store: url}, 5*time.Second, guard)
	if err != nil {
		t.Fatal(err)
	}
	records := store.NewRedis(rdb)
	t.Cleanup(func() { records.Close() })
	env := startEnv(t, envOptions{
		limiter:  &ratelimit.Options{Store: url, OnStoreError: policy, Guard: guard, StoreTimeout: 3 * time.Second},
		store:    records,
		upstream: upstream,
		mutate: func(c *config.Config) {
			c.Ratelimit.Store, c.Ratelimit.OnStoreError = url, policy
		},
	})
	return env, srv, guard
}

// TestHungStoreBoundedPerRequest: with the Redis of the limiter and the record store stopped
// by SIGSTOP, each request on each route waits one store timeout at most (the request's
// budget, not one timeout per command), and once the store's breaker is open every request
// is answered at once by on_store_error: served with allow, refused with Retry-After: 1 in
// the route's shape with deny (503; Anthropic's 529 overloaded on /v1/messages).
func TestHungStoreBoundedPerRequest(t *testing.T) {
	for _, policy := range []string{"allow", "deny"} {
		for _, r := range hungStoreRoutes {
			t.Run(policy+"/"+r.name, func(t *testing.T) {
				env, srv, guard := hungStoreEnv(t, policy)
				if st, _, b := env.do(t, http.MethodPost, r.path, keyAlpha1, []byte(r.body)); st != http.StatusOK {
					t.Fatalf("before the stop: %d %s", st, b)
				}
				srv.Pause()
				check := func(what string) time.Duration {
					t.Helper()
					start := time.Now()
					st, h, b := env.do(t, http.MethodPost, r.path, keyAlpha1, []byte(r.body))
					took := time.Since(start)
					switch policy {
					case "allow":
						if st != http.StatusOK {
							t.Fatalf("%s: %d %s, want the call served (on_store_error: allow)", what, st, b)
						}
					case "deny":
						if st != r.denied || h.Get("Retry-After") != "1" || !strings.HasPrefix(string(b), r.shape) {
							t.Fatalf("%s: %d Retry-After %q %s, want a %d in the route's shape with Retry-After: 1", what, st, h.Get("Retry-After"), b, r.denied)
						}
					}
					return took
				}
				// Until the breaker opens (redisconn.OpenAfter commands without an answer in
				// a row) each request waits one store timeout (its budget) at most, and its own
				// work, which the slack covers on a loaded machine; before the bound, chat took
				// 2 s and responses 4 s.
				for i := 0; !guard.Open(); i++ {
					if i == redisconn.OpenAfter {
						t.Fatalf("the store's breaker did not open after %d requests", i)
					}
					if took := check("before the breaker opened"); took > redisconn.RequestBudget+hungSlack {
						t.Fatalf("request %d on the hung store took %v, want at most %v and its own work", i+1, took, redisconn.RequestBudget)
					}
				}
				// Every command is now refused without being sent: a request that waited on
				// the store at all would take its whole budget. Every one would, so the median
				// says it, and a loaded machine's odd slow request does not.
				took := make([]time.Duration, 11)
				for i := range took {
					took[i] = check("with the breaker open")
				}
				slices.Sort(took)
				if median := took[len(took)/2]; median >= redisconn.RequestBudget {
					t.Fatalf("with the breaker open the median request took %v: it waited on the store", median)
				}
				t.Logf("breaker open: median of %d requests %v, slowest %v", len(took), took[len(took)/2], took[len(took)-1])
			})
		}
	}
}

// TestHungStoreConcurrent: many requests at once on a hung store each wait one store timeout
// at most, though they hold every pooled connection between them.
func TestHungStoreConcurrent(t *testing.T) {
	env, srv, _ := hungStoreEnv(t, "allow")
	body := []byte(hungStoreRoutes[1].body)
	if st, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, body); st != http.StatusOK {
		t.Fatalf("before the stop: %d %s", st, b)
	}
	srv.Pause()
	const n = 16
	var wg sync.WaitGroup
	took := make([]time.Duration, n)
	status := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			status[i], _, _ = env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, body)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i := range n {
		if status[i] != http.StatusOK || took[i] > redisconn.RequestBudget+hungSlack {
			t.Fatalf("request %d: %d in %v", i, status[i], took[i])
		}
	}
}

// TestHungStoreMidRequest: Redis stops while the platform works on the call, after the
// request's admission went through. The response's record, written after the answer with the
// record store's own 5 s timeout, waits only what is left of the request's budget.
func TestHungStoreMidRequest(t *testing.T) {
	var sim http.Handler
	var srv *redistest.Server
	var once sync.Once
	paused := make(chan struct{})
	env, s, guard := hungStoreEnvWith(t, "allow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && strings.Contains(r.URL.Path, "responses") {
			once.Do(func() { srv.Pause(); close(paused) })
		}
		sim.ServeHTTP(w, r)
	}))
	sim, srv = env.sim, s
	start := time.Now()
	st, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(hungStoreRoutes[1].body))
	took := time.Since(start)
	select {
	case <-paused:
	default:
		t.Fatal("the platform was never called")
	}
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, b)
	}
	if took > redisconn.RequestBudget+hungSlack {
		t.Fatalf("the request took %v: its record's write waited past the request's budget (%v)", took, redisconn.RequestBudget)
	}
	_ = guard
	t.Logf("request with Redis stopped mid-call: %v", took)
}

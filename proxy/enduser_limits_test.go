package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/ratelimit"
	"modelgate/redisconn/redistest"
)

// endUserYAML limits the end users of each team by one measure: alpha's by requests per
// minute, beta's by tokens per day, gamma's by spend per day.
func endUserYAML() string {
	return apitest.SimUpstreamYAML + `models:
  - id: sim-chat
    price: {input: 1000, output: 1000}
teams:
` + teamYAML("alpha", "end_user_limits: {requests_per_minute: 2}") +
		teamYAML("beta", "end_user_limits: {tokens_per_day: 100}") +
		teamYAML("gamma", "end_user_limits: {spend_per_day: 0.05}") +
		"admin_keys: [mg-admin-key]\n"
}

// endUserRoute sends one request naming user ("" names none) on a route.
type endUserRoute struct {
	name, path string
	body       func(user string) string
	shape      string // what the route's 429 starts with
}

var endUserRoutes = []endUserRoute{
	{"chat", "/v1/chat/completions", func(u string) string {
		return `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]` + field(`"user"`, u) + `}`
	}, `{"error":{"message":`},
	{"responses", "/v1/responses", func(u string) string {
		return `{"model":"sim-chat","max_output_tokens":16,"input":"hi"` + field(`"safety_identifier"`, u) + `}`
	}, `{"error":{"message":`},
	{"messages", "/v1/messages", func(u string) string {
		md := ""
		if u != "" {
			md = `,"metadata":{"user_id":"` + u + `"}`
		}
		return `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]` + md + `}`
	}, `{"type":"error","error":{"type":"rate_limit_error"`},
}

func field(name, v string) string {
	if v == "" {
		return ""
	}
	return "," + name + `:"` + v + `"`
}

// endUserLimitCases: the team's key, and the refusal's words.
var endUserLimitCases = []struct {
	name, key, message string
}{
	{"requests per minute", keyAlpha1, "Rate limit reached for requests per minute (end-user limit)"},
	{"tokens per day", keyBeta, "daily token budget (end-user limit)"},
	{"spend per day", "mg-gamma-key-1", "daily spend budget (end-user limit)"},
}

// TestEndUserLimits: each end-user limit refuses one end user with the usual 429 (in the
// route's shape, with Retry-After or x-should-retry), naming the end-user limit, while another
// end user of the same key, and requests naming none, go through.
func TestEndUserLimits(t *testing.T) {
	frozen := time.Now()
	env := startEnv(t, envOptions{yaml: endUserYAML(), ledger: memoryLedger(t), limiterNow: func() time.Time { return frozen }})
	for _, lc := range endUserLimitCases {
		for _, r := range endUserRoutes {
			t.Run(lc.name+"/"+r.name, func(t *testing.T) {
				if lc.name == "spend per day" && r.name == "messages" {
					// Anthropic names a spent budget like a rate limit: its shape differs.
					r.shape = `{"type":"error","error":{"type":`
				}
				user := strings.NewReplacer(" ", "-").Replace(lc.name + "-" + r.name)
				refusedAfter := exhaust(t, env.do, r, lc.key, user, lc.message)
				if refusedAfter == 0 {
					t.Fatal("the first request was refused")
				}
				for _, other := range []string{user + "-other", ""} {
					if status, _, b := env.do(t, http.MethodPost, r.path, lc.key, []byte(r.body(other))); status != 200 {
						t.Fatalf("end user %q held back by another's limit: %d %s", other, status, b)
					}
				}
			})
		}
	}
}

// exhaust sends requests as user until one is refused (at most 20), checks the refusal, and
// returns how many went through before it.
func exhaust(t *testing.T, do func(testing.TB, string, string, string, []byte, ...string) (int, http.Header, []byte), r endUserRoute, key, user, message string) int {
	t.Helper()
	for i := range 20 {
		status, h, b := do(t, http.MethodPost, r.path, key, []byte(r.body(user)))
		if status == 200 {
			continue
		}
		if status != http.StatusTooManyRequests || !strings.HasPrefix(string(b), r.shape) || !strings.Contains(string(b), message) {
			t.Fatalf("request %d: %d %s, want a 429 saying %q", i, status, b, message)
		}
		if h.Get("Retry-After") == "" && h.Get("X-Should-Retry") != "false" {
			t.Fatalf("a refusal without Retry-After or x-should-retry: %v", h)
		}
		return i
	}
	t.Fatalf("%s was never refused", user)
	return 0
}

// TestEndUserLimitsSharedOnRedis: replicas on one Redis share an end user's requests per
// minute and tokens per day: the end user gets no more across two replicas than from one.
func TestEndUserLimitsSharedOnRedis(t *testing.T) {
	url := "redis://" + redistest.Start(t).Addr + "/0"
	frozen := time.Now()
	var envs []*testEnv
	for range 2 {
		envs = append(envs, startEnv(t, envOptions{yaml: endUserYAML(), limiter: &ratelimit.Options{Store: url},
			limiterNow: func() time.Time { return frozen }}))
	}
	r := endUserRoutes[0]
	for _, lc := range endUserLimitCases[:2] {
		t.Run(lc.name, func(t *testing.T) {
			n := 0
			alternate := func(tb testing.TB, m, p, k string, b []byte, h ...string) (int, http.Header, []byte) {
				n++
				return envs[n%2].do(tb, m, p, k, b, h...)
			}
			user := "shared-" + strings.ReplaceAll(lc.name, " ", "-")
			got := exhaust(t, alternate, r, lc.key, user, lc.message)
			want := exhaust(t, envs[0].do, r, lc.key, user+"-alone", lc.message)
			if got != want {
				t.Fatalf("%d admitted across two replicas, %d by one", got, want)
			}
		})
	}
}

package proxy

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/store"
	"modelgate/testclock"
	"modelgate/tokens"
)

// clampYAML clamps at the top level. sim-long answers with exactly its output cap, so a
// clamped call uses all the room it was given. Team alpha has a daily token budget, team beta
// a spend budget, and gamma's key a spend budget too small for even a minimal answer.
func clampYAML() string {
	return apitest.SimUpstreamYAML + `models:
  - id: sim-long
    price: {input: 2, output: 8}
limits:
  on_budget_exceeded: clamp
teams:
` + teamYAML("alpha", "limits: {tokens_per_day: 150}") + teamYAML("beta", "limits: {spend_per_day: 0.001}") + `  - name: gamma
    keys:
      - name: gamma-1
        key: mg-gamma-key-1
        limits: {spend_per_day: 0.0001}
admin_keys: [mg-admin-key]
`
}

const keyGamma = "mg-gamma-key-1"

// clampEnv starts clampYAML with spend budgets enforced, in mode: "clamp" as written, or
// "refuse" (the default, on_budget_exceeded unset).
func clampEnv(t *testing.T, yaml, mode string) *testEnv {
	t.Helper()
	var mutate func(*config.Config)
	if mode == "refuse" {
		mutate = func(cfg *config.Config) { cfg.Limits.OnBudgetExceeded = "" }
	}
	return startEnv(t, envOptions{yaml: yaml, mutate: mutate, ledger: memoryLedger(t)})
}

// memoryLedger enforces spend budgets in memory, on testclock's running clock like the env's.
func memoryLedger(t *testing.T) *billing.Ledger {
	t.Helper()
	l, err := billing.NewLedger(context.Background(), nil, testclock.Running(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// clampRoute is one model route and how a client of it asks for a capped answer.
type clampRoute struct {
	name, path string
	streamPath string // where a stream is asked for, when not at path
	body       func(stream bool, maxOut, n int, input string) []byte
	done       []string // what ends a successful stream, one of these
	hdr        []string
}

var clampRoutes = []clampRoute{
	{name: "chat", path: "/v1/chat/completions", done: []string{"data: [DONE]"}, body: func(stream bool, maxOut, n int, input string) []byte {
		return fmt.Appendf(nil, `{"model":"sim-long","max_tokens":%d,"n":%d,"stream":%t,"messages":[{"role":"user","content":%q}]}`, maxOut, n, stream, input)
	}},
	// A Responses answer that stops at its cap ends incomplete.
	{name: "responses", path: "/v1/responses", done: []string{"event: response.completed", "event: response.incomplete"}, body: func(stream bool, maxOut, _ int, input string) []byte {
		return fmt.Appendf(nil, `{"model":"sim-long","max_output_tokens":%d,"stream":%t,"input":%q}`, maxOut, stream, input)
	}},
	{name: "messages", path: "/v1/messages", done: []string{"event: message_stop"}, hdr: []string{"anthropic-version", "2023-06-01"}, body: func(stream bool, maxOut, _ int, input string) []byte {
		return fmt.Appendf(nil, `{"model":"sim-long","max_tokens":%d,"stream":%t,"messages":[{"role":"user","content":%q}]}`, maxOut, stream, input)
	}},
	{name: "gemini", path: "/v1beta/models/sim-long:generateContent", streamPath: "/v1beta/models/sim-long:streamGenerateContent?alt=sse",
		done: []string{`"finishReason":"`}, body: func(_ bool, maxOut, _ int, input string) []byte {
			return fmt.Appendf(nil, `{"generationConfig":{"maxOutputTokens":%d},"contents":[{"parts":[{"text":%q}]}]}`, maxOut, input)
		}},
}

const storyPrompt = "tell me a long story"

// clampCall sends one request and checks that a success really succeeded.
func (env *testEnv) clampCall(t *testing.T, r clampRoute, key string, stream bool, maxOut, n int, input string) (int, http.Header, []byte) {
	t.Helper()
	path := r.path
	if stream && r.streamPath != "" {
		path = r.streamPath
	}
	status, h, b := env.do(t, "POST", path, key, r.body(stream, maxOut, n, input), r.hdr...)
	if status == http.StatusOK {
		if stream && !slices.ContainsFunc(r.done, func(end string) bool { return strings.Contains(string(b), end) }) {
			t.Fatalf("%s stream did not finish: %s", r.name, b)
		}
		if e := gjson.GetBytes(b, "error"); !stream && e.Exists() && e.Type != gjson.Null {
			t.Fatalf("%s answer is an error: %s", r.name, b)
		}
	}
	return status, h, b
}

// upstreamCaps is the max_output_tokens of each generation the platform received after the
// first skip ones.
func (env *testEnv) upstreamCaps(skip int) []int64 {
	var caps []int64
	for _, r := range env.sim.Requests()[skip:] {
		caps = append(caps, gjson.GetBytes(r.Body, "max_output_tokens").Int())
	}
	return caps
}

// billedAfter waits until the platform has billed calls generations in all, and returns
// what it billed.
func (env *testEnv) billedAfter(t *testing.T, calls int) platformsim.Totals {
	t.Helper()
	var got platformsim.Totals
	if !waitFor(5*time.Second, func() bool { got = env.sim.Totals(env.canary); return got.Requests >= calls }) {
		t.Fatalf("the platform billed %d calls, want %d", got.Requests, calls)
	}
	return got
}

// teamDayTokens is what the limiter counts against team alpha today, once its settlements
// match the platform's bill.
func (env *testEnv) teamDayTokens(t *testing.T, billed platformsim.Totals) int64 {
	t.Helper()
	scope := ratelimit.Scope{ID: "team:alpha", Limits: env.cfg.Teams[0].Limits}
	var used int64
	ok := waitFor(5*time.Second, func() bool {
		u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{scope})
		if err != nil {
			t.Fatal(err)
		}
		used = u[0].DayInputTokens + u[0].DayOutputTokens
		return used == billed.InputTokens+billed.OutputTokens
	})
	if !ok {
		t.Fatalf("limiter counts %d tokens for alpha, the platform billed %+v", used, billed)
	}
	return used
}

func clampedTo(t *testing.T, h http.Header) int64 {
	t.Helper()
	n, err := strconv.ParseInt(h.Get(clampedHeader), 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", clampedHeader, h.Get(clampedHeader), err)
	}
	return n
}

// assertQuotaRefusal checks the 429 insufficient_quota a spent budget answers, with nothing
// sent upstream since calls.
func (env *testEnv) assertQuotaRefusal(t *testing.T, status int, h http.Header, b []byte, calls int) {
	t.Helper()
	// OpenAI's shape names the code; Anthropic's has only the type, Google's its status.
	quota := strings.Contains(string(b), `"code":"insufficient_quota"`) || strings.Contains(string(b), `"type":"rate_limit_error"`) ||
		strings.Contains(string(b), `"status":"RESOURCE_EXHAUSTED"`)
	if status != http.StatusTooManyRequests || h.Get("X-Should-Retry") != "false" || !quota {
		t.Fatalf("want 429 insufficient_quota: %d %v %s", status, h, b)
	}
	if h.Get(clampedHeader) != "" {
		t.Errorf("a refusal carries %s: %s", clampedHeader, h.Get(clampedHeader))
	}
	if got := env.upstreamCalls(); got != calls {
		t.Errorf("a refused call reached the platform: %d calls, want %d", got, calls)
	}
}

// With tokens_per_day nearly spent, a call whose output cap does not fit is clamped to what
// is left (per choice for n > 1) instead of refused, and the budget holds.
func TestClampDailyTokens(t *testing.T) {
	const budget = 150
	type tc struct {
		name   string
		route  clampRoute
		stream bool
		n      int
	}
	var cases []tc
	for _, r := range clampRoutes {
		for _, stream := range []bool{false, true} {
			cases = append(cases, tc{fmt.Sprintf("%s/stream=%t", r.name, stream), r, stream, 1})
		}
	}
	cases = append(cases, tc{"chat/n=2", clampRoutes[0], false, 2}, tc{"chat/n=2/stream", clampRoutes[0], true, 2})
	for _, c := range cases {
		for _, mode := range []string{"clamp", "refuse"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				env := clampEnv(t, clampYAML(), mode)
				// A first small call touches the budget: an untouched one admits any reservation.
				if status, _, b := env.clampCall(t, c.route, keyAlpha1, false, 16, 1, storyPrompt); status != http.StatusOK {
					t.Fatalf("first call: %d %s", status, b)
				}
				before := env.billedAfter(t, 1)
				left := budget - env.teamDayTokens(t, before)

				status, h, b := env.clampCall(t, c.route, keyAlpha1, c.stream, 2000, c.n, storyPrompt)
				if mode == "refuse" {
					env.assertQuotaRefusal(t, status, h, b, 1)
					return
				}
				if status != http.StatusOK {
					t.Fatalf("clamped call: %d %s", status, b)
				}
				capped := clampedTo(t, h)
				// What is left covers n choices of the input estimate and the clamped cap.
				estimate := left/int64(c.n) - capped
				if capped < minClampedOutput || capped >= 2000 || estimate <= 0 {
					t.Fatalf("clamped to %d with %d tokens left: estimate %d", capped, left, estimate)
				}
				caps := env.upstreamCaps(1)
				if len(caps) != c.n {
					t.Fatalf("%d generations upstream, want %d", len(caps), c.n)
				}
				for _, got := range caps {
					if got != capped {
						t.Errorf("the platform was asked for %d output tokens, the header says %d", got, capped)
					}
				}
				after := env.billedAfter(t, 1+c.n)
				in, out := after.InputTokens-before.InputTokens, after.OutputTokens-before.OutputTokens
				if out > capped*int64(c.n) {
					t.Errorf("%d output tokens billed, more than %d choices of %d", out, c.n, capped)
				}
				// The budget is overrun by no more than the input estimate's error.
				margin := max(in-estimate*int64(c.n), 0)
				if used := env.teamDayTokens(t, after); used > budget+margin {
					t.Errorf("alpha used %d tokens of %d (error margin %d)", used, budget, margin)
				}
			})
		}
	}
}

// With a spend budget too small for the asked cap, the call is clamped to what the money
// left buys at the model's output price.
func TestClampSpend(t *testing.T) {
	const budgetMicros = 1000 // beta's spend_per_day: 0.001
	for _, r := range clampRoutes {
		for _, stream := range []bool{false, true} {
			for _, mode := range []string{"clamp", "refuse"} {
				t.Run(fmt.Sprintf("%s/stream=%t/%s", r.name, stream, mode), func(t *testing.T) {
					env := clampEnv(t, clampYAML(), mode)
					status, h, b := env.clampCall(t, r, keyBeta, stream, 2000, 1, storyPrompt)
					if mode == "refuse" {
						env.assertQuotaRefusal(t, status, h, b, 0)
						if !strings.Contains(string(b), "could cost more than what is left of your daily spend budget") {
							t.Errorf("refusal message: %s", b)
						}
						return
					}
					if status != http.StatusOK {
						t.Fatalf("clamped call: %d %s", status, b)
					}
					capped := clampedTo(t, h)
					reqs := env.sim.Requests()
					if len(reqs) != 1 {
						t.Fatalf("%d generations upstream, want 1", len(reqs))
					}
					estimate := tokens.EstimateResponsesInput(reqs[0].Body)
					// The cap is the most that input and output at 2 and 8 per 1M tokens fit in.
					want := (budgetMicros - 2*estimate) / 8
					if capped != want || gjson.GetBytes(reqs[0].Body, "max_output_tokens").Int() != capped {
						t.Fatalf("clamped to %d, platform asked for %s; want %d", capped, gjson.GetBytes(reqs[0].Body, "max_output_tokens").Raw, want)
					}
					billed := env.billedAfter(t, 1)
					if billed.OutputTokens > capped {
						t.Errorf("%d output tokens billed, more than the cap %d", billed.OutputTokens, capped)
					}
					margin := 2 * max(billed.InputTokens-estimate, 0) // the input estimate's error, priced
					var spent float64
					waitFor(5*time.Second, func() bool { spent, _ = env.server.ledger.Spent("team:beta"); return spent > 0 })
					if want := float64(2*billed.InputTokens+8*billed.OutputTokens) / 1e6; spent != want {
						t.Errorf("beta spent %v, the platform's bill costs %v", spent, want)
					}
					if spent > float64(budgetMicros+margin)/1e6 {
						t.Errorf("beta spent %v of %v", spent, float64(budgetMicros)/1e6)
					}
				})
			}
		}
	}
}

// When not even the input and a minimal answer fit, clamp refuses exactly as refuse does.
func TestClampRefusesBelowMinimalAnswer(t *testing.T) {
	long := strings.Repeat("a long prompt that will not fit ", 100)
	cases := []struct {
		name, key, input string
		warm             bool // touch alpha's daily token budget first
	}{
		{"spend: input and 16 tokens cost more than is left", keyGamma, storyPrompt, false},
		{"daily tokens: the input alone is more than is left", keyAlpha1, long, true},
	}
	for _, c := range cases {
		for _, r := range clampRoutes {
			t.Run(c.name+"/"+r.name, func(t *testing.T) {
				answers := map[string][]byte{}
				for _, mode := range []string{"clamp", "refuse"} {
					env := clampEnv(t, clampYAML(), mode)
					calls := 0
					if c.warm {
						if status, _, b := env.clampCall(t, r, c.key, false, 16, 1, storyPrompt); status != http.StatusOK {
							t.Fatalf("first call: %d %s", status, b)
						}
						env.teamDayTokens(t, env.billedAfter(t, 1))
						calls = 1
					}
					status, h, b := env.clampCall(t, r, c.key, false, 2000, 1, c.input)
					env.assertQuotaRefusal(t, status, h, b, calls)
					answers[mode] = b
				}
				if string(answers["clamp"]) != string(answers["refuse"]) {
					t.Errorf("clamp refuses otherwise than refuse:\n%s\n%s", answers["clamp"], answers["refuse"])
				}
			})
		}
	}
}

// Rate limits are never clamped: a call over tokens_per_minute waits, whatever the mode.
func TestClampLeavesRateLimitsAlone(t *testing.T) {
	yaml := strings.Replace(clampYAML(), "limits: {tokens_per_day: 150}", "limits: {tokens_per_minute: 150}", 1)
	env := clampEnv(t, yaml, "clamp")
	if status, _, b := env.clampCall(t, clampRoutes[1], keyAlpha1, false, 16, 1, storyPrompt); status != http.StatusOK {
		t.Fatalf("first call: %d %s", status, b)
	}
	env.billedAfter(t, 1)
	status, h, b := env.clampCall(t, clampRoutes[1], keyAlpha1, false, 2000, 1, storyPrompt)
	if status != http.StatusTooManyRequests || !strings.Contains(string(b), "rate_limit_exceeded") || h.Get(clampedHeader) != "" {
		t.Fatalf("want a 429 rate_limit_exceeded, not clamped: %d %v %s", status, h, b)
	}
	if env.upstreamCalls() != 1 {
		t.Errorf("a refused call reached the platform")
	}
}

// A background response is clamped when it is queued: the header is on the queued answer,
// and the job asks the platform for the clamped cap.
func TestClampBackgroundResponse(t *testing.T) {
	env := startEnv(t, envOptions{yaml: clampYAML(), ledger: memoryLedger(t), store: tempBolt(t, store.BoltOptions{})})
	t.Cleanup(env.server.Close)
	status, h, b := env.do(t, "POST", "/v1/responses", keyBeta, []byte(`{"model":"sim-long","max_output_tokens":2000,"input":"tell me a long story","background":true}`))
	if status != http.StatusOK || gjson.GetBytes(b, "status").Str != "queued" {
		t.Fatalf("submit: %d %s", status, b)
	}
	capped := clampedTo(t, h)
	done := pollUntil(t, env, keyBeta, gjson.GetBytes(b, "id").Str, "completed", "incomplete")
	if got := done.Get("usage.output_tokens").Int(); got == 0 || got > capped {
		t.Errorf("the job produced %d output tokens, cap %d", got, capped)
	}
	caps := env.upstreamCaps(0)
	if len(caps) != 1 || caps[0] != capped {
		t.Fatalf("the platform was asked for %v output tokens, the header says %d", caps, capped)
	}
}

// In passthrough mode the top-level limits are each caller's, and so is their
// on_budget_exceeded.
func TestClampPassthroughCaller(t *testing.T) {
	const caller = "sk-passthrough-caller-1"
	yaml := apitest.SimUpstreamYAML + `models:
  - id: sim-long
limits: {tokens_per_day: 150, on_budget_exceeded: clamp}
`
	env := startEnv(t, envOptions{yaml: yaml, simKeys: []string{caller}})
	r := clampRoutes[1]
	if status, _, b := env.clampCall(t, r, caller, false, 16, 1, storyPrompt); status != http.StatusOK {
		t.Fatalf("first call: %d %s", status, b)
	}
	// The first call's reservation touched the budget: the second's cap no longer fits.
	status, h, b := env.clampCall(t, r, caller, false, 2000, 1, storyPrompt)
	if status != http.StatusOK {
		t.Fatalf("clamped call: %d %s", status, b)
	}
	capped := clampedTo(t, h)
	if caps := env.upstreamCaps(1); len(caps) != 1 || caps[0] != capped || capped < minClampedOutput || capped >= 2000 {
		t.Fatalf("clamped to %d, the platform was asked for %v", capped, caps)
	}
}

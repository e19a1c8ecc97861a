package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/platformsim"
	"modelgate/ratelimit"
)

// limitsYAML gives team alpha tight budgets and key alpha-1 its own request limit. It lists
// the simulator's models the limit tests call.
const limitsYAML = `
upstream:
  gateway_url: ${SIM_URL}
  base_url: ${SIM_URL}
  api_key: ${CANARY}
  max_retries: 0
models:
  - id: sim-chat
  - id: sim-tools
  - id: sim-long
  - id: sim-slow
  - id: sim-failed
  - id: sim-500
  - id: sim-503
  - id: sim-429
teams:
  - name: alpha
    limits:
      requests_per_minute: 100
      tokens_per_minute: 1000000
      concurrent_requests: 1
      tokens_per_day: 5000000
    keys:
      - name: alpha-1
        key: mg-alpha-key-1
        limits: { requests_per_minute: 3 }
      - name: alpha-2
        key: mg-alpha-key-2
  - name: beta
    limits:
      tokens_per_day: 60
    keys:
      - name: beta-1
        key: mg-beta-key-1
admin_keys: [mg-admin-key]
`

var rateHeaders = []string{
	"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests",
	"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens",
}

func TestRateLimitHeadersOnAnswersAndStreams(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	tests := []struct {
		name, method, path, body string
		wantStatus               int
	}{
		{"responses_json", "POST", "/v1/responses", `{"model":"sim-chat","input":"hi"}`, 200},
		{"responses_stream", "POST", "/v1/responses", `{"model":"sim-chat","input":"hi","stream":true}`, 200},
		{"chat_json", "POST", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`, 200},
		{"chat_stream", "POST", "/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200},
		{"models", "GET", "/v1/models", ``, 200},
		{"bad_body_before_admission", "POST", "/v1/chat/completions", `{"model":"sim-chat","messages":[]}`, 400},
		{"unknown_route", "GET", "/v1/nothing", ``, 404},
		{"upstream_error", "POST", "/v1/responses", `{"model":"sim-500","input":"hi"}`, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := env.do(t, tt.method, tt.path, keyAlpha2, []byte(tt.body))
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tt.wantStatus, body)
			}
			for _, h := range rateHeaders {
				if hdr.Get(h) == "" {
					t.Errorf("missing %s", h)
				}
			}
			// The tighter of key (unlimited) and team (100/min) is reported.
			if got := hdr.Get("X-Ratelimit-Limit-Requests"); got != "100" {
				t.Errorf("limit-requests %q, want 100", got)
			}
		})
	}
}

func TestRequestsPerMinuteRefusal(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	body := []byte(`{"model":"sim-chat","input":"hi"}`)
	for i := range 3 {
		status, hdr, b := env.do(t, "POST", "/v1/responses", keyAlpha1, body)
		if status != 200 {
			t.Fatalf("request %d: status %d: %s", i+1, status, b)
		}
		if got, want := hdr.Get("X-Ratelimit-Remaining-Requests"), strconv.Itoa(2-i); got != want {
			t.Errorf("request %d: remaining %s, want %s", i+1, got, want)
		}
	}
	before := env.upstreamCalls()
	status, hdr, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(`{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`))
	if status != http.StatusTooManyRequests {
		t.Fatalf("4th request: status %d, want 429: %s", status, b)
	}
	e := assertOpenAIError(t, b)
	if e.Error.Code == nil || *e.Error.Code != "rate_limit_exceeded" {
		t.Errorf("code %v, want rate_limit_exceeded", e.Error.Code)
	}
	ra, err := strconv.Atoi(hdr.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After %q, want whole seconds in 1..60", hdr.Get("Retry-After"))
	}
	if env.upstreamCalls() != before {
		t.Errorf("a refused request reached the platform")
	}
	// The other key of the team is not limited by alpha-1's own figure.
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha2, body); status != 200 {
		t.Errorf("alpha-2 refused: %d %s", status, b)
	}
}

func TestDailyBudgetRefusalIsInsufficientQuota(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	// beta has 60 tokens a day; a sim-long answer spends more than that.
	status, _, b := env.do(t, "POST", "/v1/responses", keyBeta, []byte(`{"model":"sim-long","input":"spend it all"}`))
	if status != 200 {
		t.Fatalf("first request: %d %s", status, b)
	}
	status, hdr, b := env.do(t, "POST", "/v1/responses", keyBeta, []byte(`{"model":"sim-chat","input":"more"}`))
	if status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", status, b)
	}
	e := assertOpenAIError(t, b)
	if e.Error.Code == nil || *e.Error.Code != "insufficient_quota" || e.Error.Type != "insufficient_quota" {
		t.Errorf("error %+v, want insufficient_quota", e.Error)
	}
	if hdr.Get("X-Should-Retry") != "false" {
		t.Errorf("x-should-retry %q, want false", hdr.Get("X-Should-Retry"))
	}
	if hdr.Get("Retry-After") == "" {
		t.Errorf("no Retry-After on a daily refusal")
	}
}

// openStream starts a streamed request and returns once its first event arrived.
func openStream(t *testing.T, env *testEnv, ctx context.Context, key, path, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", env.front.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream status %d: %s", resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return resp, r
}

func TestConcurrencyLimitHoldsForStreamsAndFrees(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, r := openStream(t, env, ctx, keyAlpha2, "/v1/chat/completions", `{"model":"sim-slow","stream":true,"messages":[{"role":"user","content":"hold the slot"}]}`)
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha2, []byte(`{"model":"sim-chat","input":"hi"}`))
	if status != http.StatusTooManyRequests || !strings.Contains(string(b), "rate_limit_exceeded") {
		t.Fatalf("second concurrent request: %d %s; want 429 rate_limit_exceeded", status, b)
	}
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The slot is released when the handler returns, just after the last byte.
	deadline := time.Now().Add(2 * time.Second)
	for {
		status, _, b = env.do(t, "POST", "/v1/responses", keyAlpha2, []byte(`{"model":"sim-chat","input":"hi"}`))
		if status == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status != 200 {
		t.Fatalf("slot not released after the stream ended: %d %s", status, b)
	}
}

// The limiter is charged exactly what the platform charged, over streams, non-streams, both
// APIs, client cancellations and failed responses; a stream the client cut is charged what
// was read plus the in-flight allowance (see charge), the only figure here modelgate cannot
// know.
func TestTokenAccountingMatchesPlatform(t *testing.T) {
	env := newTestEnv(t, baseYAML, nil)
	type call struct {
		path, body  string
		cancelAfter int // stream: read this many lines, then leave
	}
	calls := []call{
		{"/v1/responses", `{"model":"sim-chat","input":"one"}`, 0},
		{"/v1/responses", `{"model":"sim-long","input":"two","stream":true}`, 0},
		{"/v1/responses", `{"model":"sim-slow","input":"three, cut short","stream":true}`, 12},
		{"/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"four"}]}`, 0},
		{"/v1/chat/completions", `{"model":"sim-long","stream":true,"messages":[{"role":"user","content":"five"}]}`, 0},
		{"/v1/chat/completions", `{"model":"sim-slow","stream":true,"messages":[{"role":"user","content":"six, cut short"}]}`, 10},
		{"/v1/chat/completions", `{"model":"sim-tools","messages":[{"role":"user","content":"parallel please"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"string"}}}}}]}`, 0},
		{"/v1/responses", `{"model":"sim-failed","input":"seven"}`, 0},
		{"/v1/chat/completions", `{"model":"sim-failed","stream":true,"messages":[{"role":"user","content":"eight"}]}`, 0},
		{"/v1/chat/completions", `{"model":"sim-chat","n":2,"messages":[{"role":"user","content":"nine"}]}`, 0},
	}
	cuts := int64(0)
	for _, c := range calls {
		if c.cancelAfter > 0 {
			cuts++
		}
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", env.front.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+keyAlpha1)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if c.cancelAfter == 0 {
				_, _ = io.Copy(io.Discard, resp.Body)
				return
			}
			r := bufio.NewReader(resp.Body)
			for range c.cancelAfter {
				if _, err := r.ReadString('\n'); err != nil {
					t.Errorf("%s: stream ended before the cut: %v", c.body, err)
					return
				}
			}
			cancel()
		})
	}
	wg.Wait()
	// Both sides book a moment after the client was answered or left: modelgate when the
	// handler returns, the platform after its last flush. Read both until they settle.
	var got ratelimit.ScopeUsage
	var want platformsim.Totals
	deadline := time.Now().Add(3 * time.Second)
	for {
		want = env.sim.Totals(env.canary)
		want.OutputTokens += cuts * accounting.InFlightAllowance
		u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: "team:alpha"}})
		if err != nil {
			t.Fatal(err)
		}
		got = u[0]
		if (got.DayInputTokens == want.InputTokens && got.DayOutputTokens == want.OutputTokens) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got.DayInputTokens != want.InputTokens || got.DayOutputTokens != want.OutputTokens {
		t.Errorf("modelgate charged in=%d out=%d, the platform charged in=%d out=%d",
			got.DayInputTokens, got.DayOutputTokens, want.InputTokens, want.OutputTokens)
	}
	if want.InputTokens == 0 || want.OutputTokens == 0 {
		t.Errorf("nothing was charged: the run did not exercise accounting")
	}
	t.Logf("platform charged in=%d out=%d (with %d cut streams' allowance) over %d requests", want.InputTokens, want.OutputTokens, cuts, want.Requests)
}

func TestAdminUsage(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`)); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	for _, key := range []string{keyAlpha1, "", "nope"} {
		if status, _, _ := env.do(t, "GET", "/admin/usage", key, nil); status != 401 && status != 403 {
			t.Errorf("key %q reached /admin/usage: %d", key, status)
		}
	}
	b := adminUsage(t, env)
	var u struct {
		Teams []struct {
			Name  string `json:"name"`
			Usage struct {
				DayRequests int64 `json:"day_requests"`
			} `json:"usage"`
			Keys []struct {
				Name string `json:"name"`
			} `json:"keys"`
		} `json:"teams"`
	}
	if err := json.Unmarshal(b, &u); err != nil || len(u.Teams) != 2 || u.Teams[0].Name != "alpha" || len(u.Teams[0].Keys) != 2 {
		t.Fatalf("unexpected usage report: %s", b)
	}
	if u.Teams[0].Usage.DayRequests != 1 {
		t.Errorf("alpha day requests %d, want 1: %s", u.Teams[0].Usage.DayRequests, b)
	}
	if strings.Contains(string(b), keyAlpha1) {
		t.Errorf("usage report shows a key")
	}
}

package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/config"
)

func messagesBody(model string) []byte {
	return []byte(`{"model":"` + model + `","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`)
}

// assertAnthropicError checks {"type":"error","error":{"type","message"}} and its type.
func assertAnthropicError(t *testing.T, b []byte, typ string) {
	t.Helper()
	e := gjson.ParseBytes(b)
	if e.Get("type").Str != "error" || e.Get("error.type").Str != typ || e.Get("error.message").Str == "" || e.Get("error.param").Exists() {
		t.Errorf("body %s, want an Anthropic %s", b, typ)
	}
}

// Every refusal on the Messages routes comes in Anthropic's shape and status, with nothing
// sent upstream when modelgate refuses on its own.
func TestMessagesErrorsInAnthropicShape(t *testing.T) {
	env := newTestEnv(t, limitsYAML, func(c *config.Config) { c.Server.MaxBodyBytes = 4 << 10 })
	cases := []struct {
		name     string
		key      string
		path     string
		body     []byte
		hdr      []string
		status   int
		typ      string
		upstream bool // the platform was asked
	}{
		{name: "no key", body: messagesBody("sim-chat"), status: 401, typ: "authentication_error"},
		{name: "unknown x-api-key", body: messagesBody("sim-chat"), hdr: []string{"X-Api-Key", "mg-nope"}, status: 401, typ: "authentication_error"},
		{name: "invalid json", key: keyAlpha2, body: []byte(`{"model":`), status: 400, typ: "invalid_request_error"},
		{name: "missing max_tokens", key: keyAlpha2, body: []byte(`{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`), status: 400, typ: "invalid_request_error"},
		{name: "unknown tool type", key: keyAlpha2, body: []byte(`{"model":"sim-chat","max_tokens":5,"tools":[{"type":"teleport_20990101","name":"teleport"}],"messages":[{"role":"user","content":"hi"}]}`), status: 400, typ: "invalid_request_error"},
		{name: "body too large", key: keyAlpha2, body: []byte(`{"model":"sim-chat","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 8<<10) + `"}]}`), status: 413, typ: "request_too_large"},
		{name: "unknown sub-route", key: keyAlpha2, path: "/v1/messages/batches", body: []byte(`{}`), status: 404, typ: "not_found_error"},
		{name: "platform overloaded", key: keyAlpha2, body: messagesBody("sim-503"), status: 529, typ: "overloaded_error", upstream: true},
		{name: "platform error", key: keyAlpha2, body: messagesBody("sim-500"), status: 500, typ: "api_error", upstream: true},
		{name: "platform rate limit", key: keyAlpha2, body: messagesBody("sim-429"), status: 429, typ: "rate_limit_error", upstream: true},
		{name: "failed response", key: keyAlpha2, body: messagesBody("sim-failed"), status: 500, typ: "api_error", upstream: true},
		{name: "count_tokens without key", path: "/v1/messages/count_tokens", body: messagesBody("sim-chat"), status: 401, typ: "authentication_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = "/v1/messages"
			}
			before := env.upstreamCalls()
			status, hdr, b := env.do(t, "POST", path, tc.key, tc.body, append([]string{"anthropic-version", "2023-06-01"}, tc.hdr...)...)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			assertAnthropicError(t, b, tc.typ)
			if hdr.Get("Request-Id") == "" {
				t.Error("no request-id header")
			}
			if asked := env.upstreamCalls() > before; asked != tc.upstream {
				t.Errorf("platform asked: %v, want %v", asked, tc.upstream)
			}
		})
	}
}

func TestMessagesDrainingIsOverloaded(t *testing.T) {
	env := newTestEnv(t, "", nil)
	env.server.StartDrain()
	status, _, b := env.do(t, "POST", "/v1/messages", keyAlpha1, messagesBody("sim-chat"))
	if status != 529 {
		t.Fatalf("status %d: %s", status, b)
	}
	assertAnthropicError(t, b, "overloaded_error")
}

func TestMessagesModelOutsideAllowList(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, _, b := env.do(t, "POST", "/v1/messages", "", messagesBody("sim-tools"), "X-Api-Key", keyBeta)
	if status != 404 {
		t.Fatalf("status %d: %s", status, b)
	}
	assertAnthropicError(t, b, "not_found_error")
}

// A request-rate refusal is a 429 rate_limit_error with retry-after, and the limit figures
// come under Anthropic's header names as well as the x-ratelimit-* ones.
func TestMessagesRateLimitHeadersAndRefusal(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	for i := range 3 {
		status, hdr, b := env.do(t, "POST", "/v1/messages", "", messagesBody("sim-chat"), "X-Api-Key", keyAlpha1)
		if status != 200 {
			t.Fatalf("request %d: %d %s", i, status, b)
		}
		if got := hdr.Get("Anthropic-Ratelimit-Requests-Remaining"); got != hdr.Get("X-Ratelimit-Remaining-Requests") || got == "" {
			t.Errorf("remaining requests %q vs %q", got, hdr.Get("X-Ratelimit-Remaining-Requests"))
		}
		for _, h := range []string{"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Reset"} {
			if _, err := time.Parse(time.RFC3339, hdr.Get(h)); err != nil {
				t.Errorf("%s %q: %v", h, hdr.Get(h), err)
			}
		}
		if hdr.Get("Anthropic-Ratelimit-Tokens-Limit") != "1000000" {
			t.Errorf("tokens limit %q", hdr.Get("Anthropic-Ratelimit-Tokens-Limit"))
		}
	}
	status, hdr, b := env.do(t, "POST", "/v1/messages", "", messagesBody("sim-chat"), "X-Api-Key", keyAlpha1)
	if status != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s", status, b)
	}
	assertAnthropicError(t, b, "rate_limit_error")
	if hdr.Get("Retry-After") == "" || hdr.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" {
		t.Errorf("headers %v", hdr)
	}
}

// A stream's usage is charged as the platform reports it, like the other routes.
func TestMessagesStreamChargesPlatformUsage(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, _, b := env.do(t, "POST", "/v1/messages", keyAlpha1,
		[]byte(`{"model":"sim-long","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"long"}]}`))
	if status != 200 || !strings.HasSuffix(string(b), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("status %d: %s", status, b)
	}
	tot := env.sim.Totals(env.canary)
	var out int64
	for _, line := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && gjson.Get(d, "type").Str == "message_delta" {
			out = gjson.Get(d, "usage.output_tokens").Int()
		}
	}
	if tot.OutputTokens == 0 || out != tot.OutputTokens {
		t.Errorf("message_delta output_tokens %d, platform charged %d", out, tot.OutputTokens)
	}
}

// In passthrough mode the x-api-key an Anthropic client sends is the caller's platform key:
// the platform sees it as a bearer token, and its 401 reaches the client as
// authentication_error.
func TestMessagesPassthroughXAPIKey(t *testing.T) {
	env := newTestEnv(t, passthroughYAML, nil)
	status, _, b := env.do(t, "POST", "/v1/messages", "", messagesBody("sim-chat"), "X-Api-Key", env.canary)
	if status != 200 || gjson.GetBytes(b, "content.0.type").Str != "text" {
		t.Fatalf("status %d: %s", status, b)
	}
	reqs := env.sim.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer "+env.canary {
		t.Errorf("upstream Authorization is not the caller's key (len %d)", len(got))
	}
	status, _, b = env.do(t, "POST", "/v1/messages", "", messagesBody("sim-chat"), "X-Api-Key", "sk-not-known-to-the-platform")
	if status != 401 {
		t.Fatalf("status %d: %s", status, b)
	}
	assertAnthropicError(t, b, "authentication_error")
}

// An Anthropic SDK listing models (anthropic-version set, key in x-api-key) gets Anthropic's
// model objects, filtered by the allow-list; OpenAI clients keep theirs.
func TestModelsForAnthropicClients(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, _, b := env.do(t, "GET", "/v1/models", "", nil, "X-Api-Key", keyBeta, "Anthropic-Version", "2023-06-01")
	if status != 200 || gjson.GetBytes(b, "data.#").Int() != 1 || gjson.GetBytes(b, "data.0.type").Str != "model" ||
		gjson.GetBytes(b, "data.0.id").Str != "sim-chat" || gjson.GetBytes(b, "last_id").Str != "sim-chat" || gjson.GetBytes(b, "has_more").Type != gjson.False {
		t.Errorf("list: %d %s", status, b)
	}
	if _, err := time.Parse(time.RFC3339, gjson.GetBytes(b, "data.0.created_at").Str); err != nil {
		t.Errorf("created_at: %v", err)
	}
	status, _, b = env.do(t, "GET", "/v1/models/sim-chat", "", nil, "X-Api-Key", keyBeta, "Anthropic-Version", "2023-06-01")
	if status != 200 || gjson.GetBytes(b, "type").Str != "model" || gjson.GetBytes(b, "display_name").Str != "sim-chat" {
		t.Errorf("get: %d %s", status, b)
	}
	status, _, b = env.do(t, "GET", "/v1/models/sim-tools", "", nil, "X-Api-Key", keyBeta, "Anthropic-Version", "2023-06-01")
	if status != 404 {
		t.Fatalf("outside the allow-list: %d %s", status, b)
	}
	assertAnthropicError(t, b, "not_found_error")
	status, _, b = env.do(t, "GET", "/v1/models", keyBeta, nil)
	if status != 200 || gjson.GetBytes(b, "object").Str != "list" {
		t.Errorf("OpenAI list: %d %s", status, b)
	}
}

// A non-stream call with stop sequences stops the platform at the sequence: the answer ends
// before it, and the platform's paced stream is cancelled instead of running to its end.
func TestMessagesStopSequenceEndsUpstreamEarly(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, _, b := env.do(t, "POST", "/v1/messages", keyAlpha1,
		[]byte(`{"model":"sim-slow","max_tokens":4000,"stop_sequences":["from"],"messages":[{"role":"user","content":"a long request to be cut short"}]}`))
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	if got := gjson.GetBytes(b, "content.0.text").Str; got != "Hello " {
		t.Errorf("text %q", got)
	}
	if gjson.GetBytes(b, "stop_reason").Str != "stop_sequence" || gjson.GetBytes(b, "stop_sequence").Str != "from" {
		t.Errorf("answer %s", b)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(env.sim.Cancellations()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// A stream the platform finished is not a cancellation: only stopping it early counts.
	if got := len(env.sim.Cancellations()); got != 1 {
		t.Fatalf("the platform saw %d cancellations, want 1", got)
	}
}

package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/config"
)

// Every refusal on the Gemini routes comes in Google's shape and status, with nothing sent
// upstream when modelgate refuses on its own, and the platform's failures are mapped to it.
func TestGeminiErrorsInGoogleShape(t *testing.T) {
	env := newTestEnv(t, limitsYAML, func(c *config.Config) {
		c.Server.MaxBodyBytes = 4 << 10
		c.Translate.MaxN = 3
		c.Teams[1].Models = []string{"sim-chat"} // beta
	})
	gen := "/v1beta/models/sim-chat:generateContent"
	cases := []struct {
		name     string
		key      string
		path     string
		body     []byte
		status   int
		gstatus  string
		upstream bool // the platform was asked
	}{
		{name: "no key", path: gen, body: geminiBody("hi"), status: 401, gstatus: "UNAUTHENTICATED"},
		{name: "invalid json", key: keyAlpha2, path: gen, body: []byte(`{"contents":`), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "unknown field", key: keyAlpha2, path: gen, body: []byte(`{"contents":[],"bogus":1}`), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "case-variant key", key: keyAlpha2, path: gen, body: []byte(`{"Contents":[{"parts":[{"text":"hi"}]}]}`), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "duplicate key", key: keyAlpha2, path: gen, body: []byte(`{"contents":[{"parts":[{"text":"hi"}]}],"contents":[]}`), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "deep nesting", key: keyAlpha2, path: gen, body: []byte(strings.Repeat("[", 1000)), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "body too large", key: keyAlpha2, path: gen, body: geminiBody(strings.Repeat("x", 8<<10)), status: 413, gstatus: "INVALID_ARGUMENT"},
		{name: "model of the body differs", key: keyAlpha2, path: gen, body: []byte(`{"model":"models/sim-long","contents":[{"parts":[{"text":"hi"}]}]}`), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "candidates over max_n", key: keyAlpha2, path: gen, body: []byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":4}}`), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "streamed candidates", key: keyAlpha2, path: "/v1beta/models/sim-chat:streamGenerateContent?alt=sse", body: []byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":2}}`), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "bad model path", key: keyAlpha2, path: "/v1beta/models/a/b:generateContent", body: geminiBody("hi"), status: 400, gstatus: "INVALID_ARGUMENT"},
		{name: "unknown model", key: keyAlpha2, path: "/v1beta/models/nope:generateContent", body: geminiBody("hi"), status: 404, gstatus: "NOT_FOUND"},
		{name: "outside the allow-list", key: keyBeta, path: "/v1beta/models/sim-tools:generateContent", body: geminiBody("hi"), status: 404, gstatus: "NOT_FOUND"},
		{name: "unknown action", key: keyAlpha2, path: "/v1beta/models/sim-chat:embedContent", body: geminiBody("hi"), status: 404, gstatus: "NOT_FOUND"},
		{name: "unknown route", key: keyAlpha2, path: "/v1beta/files", body: geminiBody("hi"), status: 404, gstatus: "NOT_FOUND"},
		{name: "platform overloaded", key: keyAlpha2, path: "/v1beta/models/sim-503:generateContent", body: geminiBody("hi"), status: 503, gstatus: "UNAVAILABLE", upstream: true},
		{name: "platform error", key: keyAlpha2, path: "/v1beta/models/sim-500:generateContent", body: geminiBody("hi"), status: 500, gstatus: "INTERNAL", upstream: true},
		{name: "platform rate limit", key: keyAlpha2, path: "/v1/models/sim-429:generateContent", body: geminiBody("hi"), status: 429, gstatus: "RESOURCE_EXHAUSTED", upstream: true},
		{name: "failed response", key: keyAlpha2, path: "/v1beta/models/sim-failed:generateContent", body: geminiBody("hi"), status: 502, gstatus: "UNAVAILABLE", upstream: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := env.upstreamCalls()
			status, _, b := env.do(t, "POST", tc.path, "", tc.body, "X-Goog-Api-Key", tc.key)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			assertGeminiError(t, b, tc.status, tc.gstatus)
			if asked := env.upstreamCalls() > before; asked != tc.upstream {
				t.Errorf("platform asked: %v, want %v", asked, tc.upstream)
			}
		})
	}
}

// A request-rate refusal is a 429 RESOURCE_EXHAUSTED with Retry-After and the limit headers,
// before the body is read and with nothing sent upstream; countTokens takes no request.
func TestGeminiRateLimitRefusal(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	path := "/v1beta/models/sim-chat:generateContent"
	for i := range 3 {
		status, hdr, b := env.do(t, "POST", path, "", geminiBody("hi"), "X-Goog-Api-Key", keyAlpha1)
		if status != 200 {
			t.Fatalf("request %d: %d %s", i, status, b)
		}
		if got, want := hdr.Get("X-Ratelimit-Remaining-Requests"), strconv.Itoa(2-i); got != want {
			t.Errorf("request %d: remaining %q, want %s", i+1, got, want)
		}
	}
	before := env.upstreamCalls()
	for _, p := range []string{path, "/v1beta/models/sim-chat:streamGenerateContent?alt=sse"} {
		status, hdr, b := env.do(t, "POST", p, "", geminiBody("hi"), "X-Goog-Api-Key", keyAlpha1)
		if status != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d: %s", p, status, b)
		}
		assertGeminiError(t, b, 429, "RESOURCE_EXHAUSTED")
		if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After %q", hdr.Get("Retry-After"))
		}
		if hdr.Get("X-Ratelimit-Remaining-Requests") != "0" || hdr.Get("X-Ratelimit-Limit-Requests") != "3" {
			t.Errorf("limit headers %v", hdr)
		}
	}
	if env.upstreamCalls() != before {
		t.Error("a refused call reached the platform")
	}
	if status, _, b := env.do(t, "POST", "/v1beta/models/sim-chat:countTokens", "", geminiBody("hi"), "X-Goog-Api-Key", keyAlpha1); status != 429 {
		t.Errorf("countTokens out of requests: %d %s", status, b)
	}
}

// A draining instance answers Google's 503 UNAVAILABLE.
func TestGeminiDrainingIsUnavailable(t *testing.T) {
	env := newTestEnv(t, "", nil)
	env.server.StartDrain()
	status, _, b := env.do(t, "POST", "/v1beta/models/sim-chat:generateContent", "", geminiBody("hi"), "X-Goog-Api-Key", keyAlpha1)
	if status != 503 {
		t.Fatalf("status %d: %s", status, b)
	}
	assertGeminiError(t, b, 503, "UNAVAILABLE")
}

// A stream the platform breaks after its text ends in one chunk holding only Google's error
// object, which the SDKs raise; the JSON array is still closed.
func TestGeminiMidStreamError(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Models = append(c.Models, config.Model{ID: "sim-error-event"}) })
	_, b := env.post(t, "/v1beta/models/sim-error-event:streamGenerateContent", keyAlpha1, geminiBody("hi"), 200)
	var chunks []json.RawMessage
	if err := json.Unmarshal(b, &chunks); err != nil || len(chunks) < 2 {
		t.Fatalf("not a closed JSON array (%v): %s", err, b)
	}
	last := gjson.ParseBytes(chunks[len(chunks)-1])
	if last.Get("error.code").Int() < 500 || last.Get("error.status").Str == "" || last.Get("candidates").Exists() {
		t.Errorf("last chunk %s", chunks[len(chunks)-1])
	}
	// As SSE, the last event is the error object alone, which @google/genai raises.
	status, _, b := env.do(t, "POST", "/v1beta/models/sim-error-event:streamGenerateContent?alt=sse", keyAlpha1, geminiBody("hi"))
	events := strings.Split(strings.TrimSuffix(string(b), "\r\n\r\n"), "\r\n\r\n")
	data, _ := strings.CutPrefix(events[len(events)-1], "data: ")
	if e := gjson.Parse(data); status != 200 || len(events) < 2 || e.Get("error.code").Int() < 500 || e.Get("candidates").Exists() {
		t.Errorf("SSE: %d, last event %q", status, events[len(events)-1])
	}
}

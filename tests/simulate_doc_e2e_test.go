package tests

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// docYAML returns the first ```yaml block after heading in the markdown file path.
func docYAML(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("%s has no %q", path, heading)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatalf("%s: no yaml block after %q", path, heading)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: unterminated yaml block", path)
	}
	return block
}

// TestSimulateDocExamples runs docs/simulate.md's config for the routing examples under
// --simulate and checks what the page says each example shows.
func TestSimulateDocExamples(t *testing.T) {
	cfg := docYAML(t, "../docs/simulate.md", "## Reproducing the routing examples")
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Args: []string{"--simulate", "--log-format", "json"}})
	const key = "sim-DEMO_KEY"
	chat := func(model string, stream bool) (int, http.Header, string) {
		t.Helper()
		body := chatBody(model, "hi", stream)
		code, h, b, err := opsDo(t, "POST", g.URL+"/v1/chat/completions", key, body)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return code, h, b
	}

	t.Run("circuit_breaker", func(t *testing.T) {
		for i := range 5 {
			if code, _, b := chat("chat", false); code != 500 {
				t.Fatalf("call %d: %d %s, want the platform's 500", i+1, code, b)
			}
		}
		code, _, b := chat("chat", false)
		if code != 503 || gjson.Get(b, "error.code").Str != "model_unavailable" {
			t.Fatalf("sixth call: %d %s, want 503 model_unavailable", code, b)
		}
		_, metrics := opsMust(t, "GET", g.URL+"/metrics", "", "")
		if !strings.Contains(metrics, `modelgate_breaker_state{breaker="model:sim-500"} 2`) {
			t.Errorf("the breaker is not open in /metrics")
		}
	})

	t.Run("canary", func(t *testing.T) {
		seen := map[string]int{}
		for range 200 {
			code, b := opsMust(t, "POST", g.URL+"/v1/responses", key, responsesBody("assistant", "hi", false))
			if code != 200 {
				t.Fatalf("%d %s", code, b)
			}
			seen[gjson.Get(b, "model").Str]++
		}
		// 9 to 1: over 200 draws, v2 never chosen or chosen as often as v1 is a broken split
		// (a chance under 1e-9).
		if len(seen) != 2 || seen["assistant-v2"] == 0 || seen["assistant-v1"] <= seen["assistant-v2"] {
			t.Fatalf("answers by model %v", seen)
		}
		waitForLog(t, g, `"upstream_model":"assistant-v2"`, 1)
		// Each call counted by the route that served it (issue 45).
		_, metrics := opsMust(t, "GET", g.URL+"/metrics", "", "")
		for up, n := range seen {
			if want := `modelgate_route_calls_total{model="assistant",upstream_model="` + up + `"} ` + strconv.Itoa(n); !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("fallbacks", func(t *testing.T) {
		for _, tc := range []struct{ model, served, text string }{
			{"big", "medium", "Hello from vendor-medium."},
			{"big-window", "long", "Hello from vendor-long."},
		} {
			code, h, b := chat(tc.model, false)
			if code != 200 || h.Get("X-Modelgate-Served-Model") != tc.served ||
				!strings.HasPrefix(gjson.Get(b, "choices.0.message.content").Str, tc.text) {
				t.Errorf("%s: %d served by %q: %s", tc.model, code, h.Get("X-Modelgate-Served-Model"), b)
			}
		}
		// Each move counted by its reason (issue 45).
		_, metrics := opsMust(t, "GET", g.URL+"/metrics", "", "")
		for _, want := range []string{
			`modelgate_fallbacks_total{model="big",reason="status_5xx",served_model="medium"} 1`,
			`modelgate_fallbacks_total{model="big-window",reason="context_length",served_model="long"} 1`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("stall", func(t *testing.T) {
		code, h, b := chat("reasoner", true)
		// The stream's text comes in pieces: its end and the header say who served it.
		if code != 200 || h.Get("X-Modelgate-Served-Model") != "quick" || !strings.HasSuffix(strings.TrimSpace(b), "data: [DONE]") {
			t.Errorf("%d served by %q: %s", code, h.Get("X-Modelgate-Served-Model"), b)
		}
		_, metrics := opsMust(t, "GET", g.URL+"/metrics", "", "")
		if want := `modelgate_fallbacks_total{model="reasoner",reason="first_token_timeout",served_model="quick"} 1`; !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	})
}

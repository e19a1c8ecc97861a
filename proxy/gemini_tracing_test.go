package proxy

import (
	"net/http"
	"testing"
)

// A Gemini call's span is named by its action, carries the GenAI attributes of the call, and
// holds no key, not even one sent in the query string.
func TestTracingGemini(t *testing.T) {
	for _, c := range []struct{ name, path, route string }{
		{"generateContent", "/v1beta/models/gpt-4o-mini:generateContent?key=" + keyAlpha1, "/v1beta/models/{model}:generateContent"},
		{"streamGenerateContent", "/v1/models/gpt-4o-mini:streamGenerateContent?alt=sse&key=" + keyAlpha1, "/v1/models/{model}:streamGenerateContent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newTracedEnv(t, 0)
			code, _, body := env.call(t, c.path, "", `{"generationConfig":{"maxOutputTokens":50,"temperature":0.25},"contents":[{"parts":[{"text":"hello"}]}]}`)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			spans := env.spans(t, 1)
			srv := oneServerSpan(t, spans, "POST "+c.route)
			assertAttrs(t, srv.Attrs, map[string]any{
				"gen_ai.request.model":       "gpt-4o-mini",
				"gen_ai.response.model":      "sim-chat",
				"gen_ai.request.max_tokens":  int64(50),
				"gen_ai.request.temperature": 0.25,
				"http.route":                 c.route,
				"http.response.status_code":  int64(200),
				"modelgate.team":             "alpha",
			})
			assertAttemptsUnder(t, env, spans, srv, 1)
			assertNoKeys(t, env.resEnv, spans)
		})
	}
}

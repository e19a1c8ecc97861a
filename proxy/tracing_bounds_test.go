package proxy

import (
	"strings"
	"testing"
)

// Every span attribute a client chooses is bounded: a model name up to the 256 bytes a
// route accepts still reaches the span cut to maxLoggedModel, and printable.
func TestTracingModelAttributeBounded(t *testing.T) {
	model := strings.Repeat("m", 250) + `\u0007`
	for _, tc := range []struct{ name, path, key, body string }{
		{"responses", "/v1/responses", keyAlpha1, `{"model":"` + model + `","input":"hello"}`},
		{"chat", "/v1/chat/completions", keyAlpha1, `{"model":"` + model + `","messages":[{"role":"user","content":"hello"}]}`},
		{"messages", "/v1/messages", keyAlpha1, `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTracedEnv(t, 0)
			if code, _, body := env.call(t, tc.path, tc.key, tc.body); code != 200 && code != 404 {
				t.Fatalf("status %d: %s", code, body)
			}
			srv := oneServerSpan(t, env.spans(t, 1), "POST "+tc.path)
			got, _ := srv.Attrs["gen_ai.request.model"].(string)
			if len(got) == 0 || len(got) > maxLoggedModel || printable(got, len(got)) != got {
				t.Errorf("gen_ai.request.model is %d bytes: %.40q", len(got), got)
			}
		})
	}
}

package proxy

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"modelgate/reqlog"
)

// A request refused before it reaches the platform is logged with the model and stream flag
// it asked for, whichever step of the preflight refused it: its body's check, the model
// allow-list or a dialect's own rule.
func TestRefusedRequestLogsWhatItAsked(t *testing.T) {
	var mu sync.Mutex
	done := map[string]reqlog.RequestSummary{}
	env := startEnv(t, envOptions{hooks: reqlog.Hooks{RequestDone: func(r reqlog.RequestSummary) {
		mu.Lock()
		done[r.ClientRequestID] = r // the X-Request-Id each case sends
		mu.Unlock()
	}}})
	tests := []struct {
		name, path, key, body string
		status                int
		model                 string
		stream                bool
	}{
		{"chat_without_messages", "/v1/chat/completions", keyAlpha1, `{"model":"sim-chat","stream":true}`, 400, "sim-chat", true},
		{"chat_too_many_choices", "/v1/chat/completions", keyAlpha1, `{"model":"sim-chat","n":99,"messages":[{"role":"user","content":"hi"}]}`, 400, "sim-chat", false},
		{"messages_without_max_tokens", "/v1/messages", keyAlpha1, `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 400, "sim-chat", true},
		{"responses_bad_input", "/v1/responses", keyAlpha1, `{"model":"sim-chat","stream":true,"input":5}`, 400, "sim-chat", true},
		{"responses_duplicate_field", "/v1/responses", keyAlpha1, `{"model":"sim-chat","stream":true,"input":"a","input":"b"}`, 400, "sim-chat", true},
		{"count_tokens_bad_messages", "/v1/messages/count_tokens", keyAlpha1, `{"model":"sim-chat","messages":5}`, 400, "sim-chat", false},
		{"model_not_allowed", "/v1/responses", keyBeta, `{"model":"sim-reasoner","stream":true,"input":"hi"}`, 404, "sim-reasoner", true},
		// A body that is not JSON names no model: it is not read past the bounded check.
		{"not_json", "/v1/chat/completions", keyAlpha1, `{"model":"sim-chat","stream":true,`, 400, "", false},
		{"too_deep", "/v1/responses", keyAlpha1, `{"model":"sim-chat","stream":true,"input":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, 400, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "req_refused_" + tc.name
			code, _, body := env.do(t, http.MethodPost, tc.path, tc.key, []byte(tc.body), "X-Request-Id", id)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			mu.Lock()
			got, ok := done[id]
			mu.Unlock()
			if !ok {
				t.Fatalf("no summary for %s", id)
			}
			if got.Model != tc.model || got.Stream != tc.stream {
				t.Errorf("logged model %q stream %v, want %q %v", got.Model, got.Stream, tc.model, tc.stream)
			}
		})
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Errorf("%d calls reached the platform", n)
	}
}

package proxy

import (
	"strings"
	"testing"

	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/relay"
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
			// The name is no entry's: unlisted models are allowed, so the call is traced
			// (a refused one ends before its span names a model).
			env := newTracedEnvWith(t, 0, func(c *config.Config) { c.Limits.UnlistedModels = config.UnlistedAllow })
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

// The platform names how an answer ended; a status no convention knows reaches the span as
// its own finish reason, bounded and printable like every attribute the platform chooses.
func TestTracingFinishReasonBounded(t *testing.T) {
	status := strings.Repeat("s", 1000) + `\u0007`
	answer := `{"id":"resp_1","object":"response","model":"sim-chat","status":"` + status + `","output":[],` +
		`"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`
	for _, tc := range []struct {
		name, body string
		reply      platformsim.Reply
	}{
		{"answer", respBody, platformsim.Reply{Status: 200, Header: map[string]string{"Content-Type": "application/json"}, Body: []byte(answer)}},
		{"stream", respStreamBody, platformsim.Reply{Events: []platformsim.Event{
			{Type: "response.completed", Data: `{"type":"response.completed","sequence_number":0,"response":` + answer + `}`}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTracedEnv(t, 0)
			env.sim.Enqueue("/v1/responses", tc.reply)
			if code, _, body := env.call(t, "/v1/responses", keyAlpha1, tc.body); code != 200 {
				t.Fatalf("status %d: %s", code, body)
			}
			srv := oneServerSpan(t, env.spans(t, 1), "POST /v1/responses")
			reasons, _ := srv.Attrs["gen_ai.response.finish_reasons"].([]any)
			if len(reasons) != 1 {
				t.Fatalf("finish reasons %v, want the one the platform named", srv.Attrs["gen_ai.response.finish_reasons"])
			}
			if got, _ := reasons[0].(string); len(got) == 0 || len(got) > relay.MaxTracedID || printable(got, len(got)) != got {
				t.Errorf("gen_ai.response.finish_reasons holds %d bytes: %.40q", len(got), got)
			}
		})
	}
}

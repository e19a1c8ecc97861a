package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/config"
)

// TestLocalChecks: requests OpenAI itself would refuse get a 400 in its shape, naming the
// parameter, and nothing goes upstream; their accepted neighbours do go upstream.
func TestLocalChecks(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Translate.MaxN = 3 })
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const fnTool = `{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}`
	const flatTool = `{"type":"function","name":"lookup","parameters":{"type":"object"}}`
	tests := []struct {
		name, path, body string
		status           int
		param, says      string
	}{
		{"n_at_cap", "/v1/chat/completions", `{"model":"sim-chat","n":3,` + msgs + `}`, 200, "", ""},
		{"n_over_cap", "/v1/chat/completions", `{"model":"sim-chat","n":4,` + msgs + `}`, 400, "n", "at most 3"},
		{"n_over_cap_stream", "/v1/chat/completions", `{"model":"sim-chat","n":50,"stream":true,` + msgs + `}`, 400, "n", "translate.max_n"},
		{"chat_required_no_tools", "/v1/chat/completions", `{"model":"sim-chat","tool_choice":"required",` + msgs + `}`, 400, "tool_choice", "required"},
		{"chat_named_unknown", "/v1/chat/completions", `{"model":"sim-chat","tools":[` + fnTool + `],"tool_choice":{"type":"function","function":{"name":"nope"}},` + msgs + `}`, 400, "tool_choice", "nope"},
		{"chat_named_known", "/v1/chat/completions", `{"model":"sim-chat","tools":[` + fnTool + `],"tool_choice":{"type":"function","function":{"name":"lookup"}},` + msgs + `}`, 200, "", ""},
		{"responses_required_no_tools", "/v1/responses", `{"model":"sim-chat","input":"hi","tool_choice":"required"}`, 400, "tool_choice", "required"},
		{"responses_named_unknown", "/v1/responses", `{"model":"sim-chat","input":"hi","tools":[` + flatTool + `],"tool_choice":{"type":"function","name":"nope"}}`, 400, "tool_choice", "nope"},
		{"responses_named_known", "/v1/responses", `{"model":"sim-chat","input":"hi","tools":[` + flatTool + `],"tool_choice":{"type":"function","name":"lookup"}}`, 200, "", ""},
		{"responses_no_input", "/v1/responses", `{"model":"sim-chat"}`, 400, "input", "input"},
		{"responses_null_input", "/v1/responses", `{"model":"sim-chat","input":null}`, 400, "input", "input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := env.upstreamCalls()
			status, _, body := env.do(t, http.MethodPost, tt.path, keyAlpha1, []byte(tt.body))
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if tt.status == 200 {
				if env.upstreamCalls() == before {
					t.Fatal("accepted without reaching the platform")
				}
				return
			}
			e := gjson.GetBytes(body, "error")
			if e.Get("type").Str != "invalid_request_error" || e.Get("param").Str != tt.param || !strings.Contains(e.Get("message").Str, tt.says) {
				t.Fatalf("error %s, want param %q mentioning %q", body, tt.param, tt.says)
			}
			if n := env.upstreamCalls() - before; n != 0 {
				t.Fatalf("refused request reached the platform %d times", n)
			}
		})
	}
}

// TestResponsesTurnWithoutInput: previous_response_id, prompt or conversation may carry the
// turn: such a request is forwarded as it is, without input, and without the tool checks
// (the prompt or earlier turn may declare the tools).
func TestResponsesTurnWithoutInput(t *testing.T) {
	env := newTestEnv(t, "", nil)
	for _, body := range []string{
		`{"model":"sim-chat","previous_response_id":"resp_123"}`,
		`{"model":"sim-chat","prompt":{"id":"pmpt_1","version":"2"},"tool_choice":"required"}`,
		`{"model":"sim-chat","conversation":"conv_1","input":null}`,
	} {
		env.sim.Reset()
		status, _, out := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(body))
		reqs := env.sim.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%s: not forwarded (status %d: %s)", body, status, out)
		}
		if gjson.GetBytes(reqs[0].Body, "input").Exists() != strings.Contains(body, `"input"`) {
			t.Fatalf("%s: forwarded as %s", body, reqs[0].Body)
		}
	}
}

// TestFanOutReservesAllChoices: admission reserves the tokens of every choice (n upstream
// calls), as the remaining-tokens header of the admitted request shows.
func TestFanOutReservesAllChoices(t *testing.T) {
	// Each count runs on a fresh environment, so the bucket is full before the call.
	reserved := func(n int) int64 {
		env := newTestEnv(t, "", func(c *config.Config) { c.Teams[0].Limits.TokensPerMinute = 1_000_000 })
		body := `{"model":"sim-chat","max_completion_tokens":1000,"n":` + strconv.Itoa(n) + `,"messages":[{"role":"user","content":"hi"}]}`
		status, h, out := env.do(t, http.MethodPost, "/v1/chat/completions", keyAlpha1, []byte(body))
		if status != http.StatusOK {
			t.Fatalf("n=%d: status %d: %s", n, status, out)
		}
		left, err := strconv.ParseInt(h.Get("x-ratelimit-remaining-tokens"), 10, 64)
		if err != nil {
			t.Fatalf("n=%d: remaining tokens %q", n, h.Get("x-ratelimit-remaining-tokens"))
		}
		return 1_000_000 - left
	}
	one, four := reserved(1), reserved(4)
	if one < 1000 || four != 4*one {
		t.Fatalf("reserved %d for one choice and %d for four, want four times as much", one, four)
	}
}

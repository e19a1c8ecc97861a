package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/translate"
)

// tenTurns is a 10-turn conversation as Responses input items: a user message and the
// assistant's answer per turn.
func tenTurns() string {
	var items []string
	for i := range 10 {
		items = append(items,
			fmt.Sprintf(`{"role":"user","content":"turn %d: tell me about topic number %d in some detail"}`, i, i),
			fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Topic %d is a long story; here is a long answer that goes on for a while about it."}]}`, i))
	}
	return "[" + strings.Join(items, ",") + "]"
}

// lastUpstream is the body of the last call the platform received.
func lastUpstream(t *testing.T, env *testEnv) gjson.Result {
	t.Helper()
	reqs := env.sim.Requests()
	if len(reqs) == 0 {
		t.Fatal("nothing reached the platform")
	}
	return gjson.ParseBytes(reqs[len(reqs)-1].Body)
}

// TestCompactSummarisesConversation: one summarising call goes to the platform (the
// model's upstream, modelgate's instructions, the conversation then the ask, not stored, not
// streamed), and the answer is the compact API's object: the user messages, then the
// summary, with the platform's usage.
func TestCompactSummarisesConversation(t *testing.T) {
	env := newTestEnv(t, "", nil)
	body := `{"model":"gpt-4o-mini","instructions":"be a pirate","input":` + tenTurns() + `}`
	status, _, b := env.do(t, http.MethodPost, "/v1/responses/compact", keyAlpha1, []byte(body))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	if n := env.upstreamCalls(); n != 1 {
		t.Fatalf("%d platform calls, want 1", n)
	}
	up := lastUpstream(t, env)
	if up.Get("model").Str != "sim-chat" || up.Get("instructions").Str != translate.DefaultCompactInstructions ||
		up.Get("store").Type != gjson.False || up.Get("stream").Type != gjson.False {
		t.Errorf("summarising call: %s", up.Raw)
	}
	in := up.Get("input").Array()
	if len(in) != 22 || !strings.Contains(in[0].Get("content.0.text").Str, "be a pirate") || in[0].Get("role").Str != "developer" ||
		in[21].Get("role").Str != "user" || in[1].Get("content").Str != "turn 0: tell me about topic number 0 in some detail" {
		t.Errorf("summarising call's input (%d items): %s", len(in), up.Get("input").Raw)
	}

	got := gjson.ParseBytes(b)
	if !strings.HasPrefix(got.Get("id").Str, "cmp_") || got.Get("object").Str != "response.compaction" || got.Get("created_at").Int() <= 0 ||
		got.Get("usage.input_tokens").Int() <= 0 || got.Get("usage.output_tokens").Int() <= 0 {
		t.Errorf("compacted response: %s", b)
	}
	out := got.Get("output").Array()
	if len(out) != 11 {
		t.Fatalf("output has %d items, want 10 user messages and the summary: %s", len(out), b)
	}
	for i, item := range out[:10] {
		if item.Get("role").Str != "user" || item.Get("type").Str != "message" || !strings.HasPrefix(item.Get("content").Str, fmt.Sprintf("turn %d:", i)) {
			t.Errorf("output[%d] = %s, want user turn %d", i, item.Raw, i)
		}
	}
	sum := out[10]
	if sum.Get("role").Str != "assistant" || !strings.HasPrefix(sum.Get("content.0.text").Str, translate.CompactSummaryPrefix+"Hello from sim-chat.") {
		t.Errorf("summary item: %s", sum.Raw)
	}
	if len(got.Get("output").Raw) >= len(tenTurns()) {
		t.Errorf("the compacted conversation (%d bytes) is not shorter than the original (%d)", len(got.Get("output").Raw), len(tenTurns()))
	}

	// The output is the next call's input as it is.
	next := `{"model":"gpt-4o-mini","input":` + got.Get("output").Raw + `}`
	if status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(next)); status != http.StatusOK {
		t.Fatalf("next call with the compacted input: %d %s", status, b)
	}
	// The compaction was logged under its route, with its model and tokens.
	if logs := env.logs.String(); !strings.Contains(logs, `"route":"/v1/responses/compact"`) {
		t.Errorf("no access log line for the compaction:\n%s", logs)
	}
}

// TestCompactInstructionsFromConfig: models[].compact_instructions replace modelgate's own.
func TestCompactInstructionsFromConfig(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) {
		for i := range c.Models {
			if c.Models[i].ID == "sim-chat" {
				c.Models[i].CompactInstructions = "Summarise in three words."
			}
		}
	})
	for _, tc := range []struct{ model, want string }{
		{"sim-chat", "Summarise in three words."},
		{"gpt-4o-mini", translate.DefaultCompactInstructions},
	} {
		status, _, b := env.do(t, http.MethodPost, "/v1/responses/compact", keyAlpha1, []byte(`{"model":"`+tc.model+`","input":"hello"}`))
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tc.model, status, b)
		}
		if got := lastUpstream(t, env).Get("instructions").Str; got != tc.want {
			t.Errorf("%s: instructions %q, want %q", tc.model, got, tc.want)
		}
	}
}

// TestCompactFollowsPreviousResponse: a stored conversation named by previous_response_id
// is expanded into the summarising call, and its user messages come back.
func TestCompactFollowsPreviousResponse(t *testing.T) {
	env := storedEnv(t, nil, nil)
	id1 := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"first question"}`)
	id2 := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"second question","previous_response_id":"`+id1+`"}`)
	status, _, b := env.do(t, http.MethodPost, "/v1/responses/compact", keyAlpha2, []byte(`{"model":"sim-chat","previous_response_id":"`+id2+`"}`))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	in := lastUpstream(t, env).Get("input")
	if !strings.Contains(in.Raw, "first question") || !strings.Contains(in.Raw, "second question") || !strings.Contains(in.Raw, "You said: first question") {
		t.Errorf("summarising call's input lacks the stored conversation: %s", in.Raw)
	}
	out := gjson.GetBytes(b, "output").Array()
	if len(out) != 3 || out[0].Get("content.0.text").Str != "first question" || out[1].Get("content.0.text").Str != "second question" {
		t.Errorf("output: %s", gjson.GetBytes(b, "output").Raw)
	}
	// Another team cannot compact it.
	status, _, b = env.do(t, http.MethodPost, "/v1/responses/compact", keyBeta, []byte(`{"model":"sim-chat","previous_response_id":"`+id2+`"}`))
	if status != http.StatusBadRequest || gjson.GetBytes(b, "error.code").Str != "previous_response_not_found" {
		t.Errorf("another team: %d %s", status, b)
	}
}

// TestCompactAndInputTokensRefusals: bad bodies get a 4xx in OpenAI's shape and nothing
// reaches the platform.
func TestCompactAndInputTokensRefusals(t *testing.T) {
	env := newTestEnv(t, "", nil)
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"not json", `{"model":`, 400, "invalid_json"},
		{"not an object", `["model"]`, 400, "invalid_json"},
		{"no model", `{"input":"hi"}`, 400, "missing_required_parameter"},
		{"model not a string", `{"model":7,"input":"hi"}`, 400, "missing_required_parameter"},
		{"unknown field", `{"model":"sim-chat","input":"hi","temprature":1}`, 400, "unknown_parameter"},
		{"case variant", `{"model":"sim-chat","input":"hi","Model":"other"}`, 400, "unknown_parameter"},
		{"steering field", `{"model":"sim-chat","input":"hi","api_key":"x"}`, 400, "unknown_parameter"},
		{"duplicate model", `{"model":"sim-chat","model":"sim-tools","input":"hi"}`, 400, "duplicate_parameter"},
		{"input a number", `{"model":"sim-chat","input":5}`, 400, "invalid_type"},
		{"previous not a string", `{"model":"sim-chat","input":"hi","previous_response_id":5}`, 400, "invalid_type"},
		{"previous without a store", `{"model":"sim-chat","previous_response_id":"resp_1"}`, 400, "previous_response_not_found"},
		{"metadata too long", `{"model":"sim-chat","input":"hi","metadata":{"a":"` + strings.Repeat("x", 513) + `"}}`, 400, "invalid_value"},
		{"model not allowed", `{"model":"sim-tools","input":"hi"}`, 404, "model_not_found"},
	}
	for _, route := range []string{"/v1/responses/compact", "/v1/responses/input_tokens"} {
		for _, tc := range cases {
			status, _, b := env.do(t, http.MethodPost, route, keyBeta, []byte(tc.body))
			if status != tc.status {
				t.Errorf("%s %s: status %d, want %d: %s", route, tc.name, status, tc.status, b)
				continue
			}
			e := assertOpenAIError(t, b)
			if tc.code != "" && (e.Error.Code == nil || *e.Error.Code != tc.code) {
				t.Errorf("%s %s: %s, want code %s", route, tc.name, b, tc.code)
			}
		}
	}
	// Compact alone: nothing to compact.
	for _, body := range []string{`{"model":"sim-chat"}`, `{"model":"sim-chat","input":[]}`, `{"model":"sim-chat","input":null}`} {
		if status, _, b := env.do(t, http.MethodPost, "/v1/responses/compact", keyBeta, []byte(body)); status != 400 {
			t.Errorf("compact %s: %d %s", body, status, b)
		}
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Errorf("%d refused requests reached the platform", n)
	}
}

// TestInputTokensCount: the calibrated estimate of a Responses body, growing with its input,
// close to count_tokens for the same text, with nothing sent upstream.
func TestInputTokensCount(t *testing.T) {
	env := newTestEnv(t, "", nil)
	count := func(body string) int64 {
		t.Helper()
		status, _, b := env.do(t, http.MethodPost, "/v1/responses/input_tokens", keyAlpha1, []byte(body))
		if status != http.StatusOK || gjson.GetBytes(b, "object").Str != "response.input_tokens" {
			t.Fatalf("status %d: %s", status, b)
		}
		return gjson.GetBytes(b, "input_tokens").Int()
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	short := count(`{"model":"sim-chat","input":"hello"}`)
	long := count(`{"model":"sim-chat","input":[{"role":"user","content":"` + text + `"}]}`)
	longer := count(`{"model":"sim-chat","instructions":"be brief","input":[{"role":"user","content":"` + text + text + `"}]}`)
	if !(0 < short && short < long && long < longer) {
		t.Errorf("counts do not grow with the input: %d, %d, %d", short, long, longer)
	}
	// A hosted tool the platform cannot run is left out of the estimate, as out of a call.
	fn := `{"type":"function","name":"lookup","description":"` + text + `","parameters":{"type":"object"}}`
	withFn := count(`{"model":"sim-chat","input":"hello","tools":[` + fn + `]}`)
	withHosted := count(`{"model":"sim-chat","input":"hello","tools":[` + fn + `,{"type":"web_search","search_context_size":"` + text + `"}]}`)
	if withFn <= short || withHosted != withFn {
		t.Errorf("tools: none %d, a function %d, and a hosted tool besides %d", short, withFn, withHosted)
	}
	status, _, b := env.do(t, http.MethodPost, "/v1/messages/count_tokens", keyAlpha1,
		[]byte(`{"model":"sim-chat","messages":[{"role":"user","content":"`+text+`"}]}`))
	if status != http.StatusOK {
		t.Fatalf("count_tokens: %d %s", status, b)
	}
	messages := gjson.GetBytes(b, "input_tokens").Int()
	if diff := float64(long-messages) / float64(messages); diff > 0.1 || diff < -0.1 {
		t.Errorf("input_tokens %d and count_tokens %d differ by %.0f%%", long, messages, diff*100)
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Errorf("input_tokens sent %d calls upstream", n)
	}
}

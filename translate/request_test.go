package translate

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseChatRejects(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	tests := []struct {
		name, body, param, code string
	}{
		{"invalid_json", `{"model":`, "", "invalid_json"},
		{"not_object", `[1]`, "", codeInvalidType},
		{"missing_model", `{"messages":[` + user + `]}`, "model", codeMissing},
		{"model_number", `{"model":3,"messages":[` + user + `]}`, "model", codeInvalidType},
		{"missing_messages", `{"model":"m"}`, "messages", codeMissing},
		{"messages_object", `{"model":"m","messages":{}}`, "messages", codeInvalidType},
		{"empty_messages", `{"model":"m","messages":[]}`, "messages", "empty_array"},
		{"message_string", `{"model":"m","messages":["hi"]}`, "messages[0]", codeInvalidType},
		{"unknown_role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", codeInvalidValue},
		{"missing_role", `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role", codeMissing},
		{"content_number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", codeInvalidType},
		{"unknown_part", `{"model":"m","messages":[{"role":"user","content":[{"type":"video","video":{}}]}]}`, "messages[0].content[0].type", codeInvalidValue},
		{"image_in_system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, "messages[0].content[0].type", codeInvalidValue},
		{"image_without_url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url", codeMissing},
		{"audio_input", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}}]}]}`, "messages[0].content[0]", codeUnsupportedValue},
		{"audio_modality", `{"model":"m","modalities":["text","audio"],"messages":[` + user + `]}`, "modalities", codeUnsupportedValue},
		{"audio_output", `{"model":"m","audio":{"voice":"alloy","format":"wav"},"messages":[` + user + `]}`, "audio", codeUnsupportedValue},
		{"n_zero", `{"model":"m","n":0,"messages":[` + user + `]}`, "n", codeInvalidValue},
		{"n_string", `{"model":"m","n":"2","messages":[` + user + `]}`, "n", codeInvalidValue},
		{"n_fraction", `{"model":"m","n":1.5,"messages":[` + user + `]}`, "n", codeInvalidValue},
		{"n_huge", `{"model":"m","n":1000,"messages":[` + user + `]}`, "n", codeInvalidValue},
		{"stream_string", `{"model":"m","stream":"yes","messages":[` + user + `]}`, "stream", codeInvalidType},
		{"include_usage_string", `{"model":"m","stream":true,"stream_options":{"include_usage":"yes"},"messages":[` + user + `]}`, "stream_options.include_usage", codeInvalidType},
		{"temperature_string", `{"model":"m","temperature":"hot","messages":[` + user + `]}`, "temperature", codeInvalidType},
		{"top_p_string", `{"model":"m","top_p":"0.5","messages":[` + user + `]}`, "top_p", codeInvalidType},
		{"verbosity_number", `{"model":"m","verbosity":1,"messages":[` + user + `]}`, "verbosity", codeInvalidType},
		{"reasoning_effort_bool", `{"model":"m","reasoning_effort":true,"messages":[` + user + `]}`, "reasoning_effort", codeInvalidType},
		{"max_tokens_zero", `{"model":"m","max_tokens":0,"messages":[` + user + `]}`, "max_tokens", codeInvalidValue},
		{"max_completion_negative", `{"model":"m","max_completion_tokens":-5,"messages":[` + user + `]}`, "max_completion_tokens", codeInvalidValue},
		{"top_logprobs_range", `{"model":"m","logprobs":true,"top_logprobs":21,"messages":[` + user + `]}`, "top_logprobs", codeInvalidValue},
		{"stop_number", `{"model":"m","stop":[1],"messages":[` + user + `]}`, "stop[0]", codeInvalidType},
		{"stop_too_many", `{"model":"m","stop":["a","b","c","d","e"],"messages":[` + user + `]}`, "stop", codeInvalidValue},
		{"metadata_array", `{"model":"m","metadata":[],"messages":[` + user + `]}`, "metadata", codeInvalidType},
		{"user_number", `{"model":"m","user":1,"messages":[` + user + `]}`, "user", codeInvalidType},
		{"tools_object", `{"model":"m","tools":{},"messages":[` + user + `]}`, "tools", codeInvalidType},
		{"tool_without_name", `{"model":"m","tools":[{"type":"function","function":{}}],"messages":[` + user + `]}`, "tools[0].function.name", codeMissing},
		{"custom_tool_without_name", `{"model":"m","tools":[{"type":"custom","custom":{}}],"messages":[` + user + `]}`, "tools[0].custom.name", codeMissing},
		{"call_without_name", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{}}]}]}`, "messages[0].tool_calls[0].function.name", codeMissing},
		{"custom_call_without_name", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{}}]}]}`, "messages[0].tool_calls[0].custom.name", codeMissing},
		{"assistant_part_number", `{"model":"m","messages":[{"role":"assistant","content":[{"type":"refusal","refusal":1}]}]}`, "messages[0].content[0].refusal", codeInvalidType},
		{"tool_choice_bad", `{"model":"m","tool_choice":"sometimes","messages":[` + user + `]}`, "tool_choice", codeInvalidValue},
		{"schema_without_name", `{"model":"m","response_format":{"type":"json_schema","json_schema":{"schema":{}}},"messages":[` + user + `]}`, "response_format.json_schema.name", codeMissing},
		{"response_format_type", `{"model":"m","response_format":{"type":"yaml"},"messages":[` + user + `]}`, "response_format.type", codeInvalidValue},
		{"unanswered_tool_call", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[1].tool_calls[0].id", codeInvalidValue},
		{"orphan_tool_result", `{"model":"m","messages":[` + user + `,{"role":"tool","tool_call_id":"call_7","content":"x"}]}`, "messages[1].tool_call_id", codeInvalidValue},
		{"tool_result_twice", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a"},{"role":"tool","tool_call_id":"c1","content":"b"}]}`, "messages[3].tool_call_id", codeInvalidValue},
		{"duplicate_call_id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f"}},{"id":"c1","type":"function","function":{"name":"g"}}]}]}`, "messages[0].tool_calls[1].id", codeInvalidValue},
		{"tool_call_without_id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].id", codeMissing},
		{"tool_without_call_id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", codeMissing},
		{"tool_result_image", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, "messages[1].content[0]", codeInvalidValue},
		{"orphan_function_message", `{"model":"m","messages":[{"role":"function","name":"f","content":"x"}]}`, "messages[0].name", codeInvalidValue},
		{"unanswered_legacy_call", `{"model":"m","messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}]}`, "messages[0].function_call", codeInvalidValue},
		{"assistant_audio", `{"model":"m","messages":[{"role":"assistant","audio":{"id":"a1"}}]}`, "messages[0].audio", codeUnsupportedValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseChat([]byte(tt.body))
			if err == nil {
				t.Fatalf("accepted: %+v", r)
			}
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("error %T is not a *Error", err)
			}
			if te.HTTPStatus() != 400 || te.Type != typeInvalidRequest || te.Param != tt.param || te.Code != tt.code {
				t.Fatalf("got status %d type %q param %q code %q (%s); want param %q code %q",
					te.HTTPStatus(), te.Type, te.Param, te.Code, te.Message, tt.param, tt.code)
			}
			// A pairing error names the unmatched id so the client can find it.
			for _, id := range []string{"call_9", "call_7"} {
				if strings.Contains(tt.body, id) && !strings.Contains(te.Message, id) {
					t.Errorf("message %q does not name %q", te.Message, id)
				}
			}
		})
	}
}

func TestParseChatSummary(t *testing.T) {
	tests := []struct {
		name string
		body string
		want ChatRequest
	}{
		{"defaults", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, ChatRequest{Model: "m", N: 1}},
		{"stream_usage", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 1, Stream: true, IncludeUsage: true}},
		{"usage_needs_stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 1}},
		{"n_stop_string", `{"model":"m","n":3,"stop":"END","messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 3, Stop: []string{"END"}}},
		{"empty_stops_ignored", `{"model":"m","stop":["","x"],"messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 1, Stop: []string{"x"}}},
		{"max_completion_wins", `{"model":"m","max_tokens":100,"max_completion_tokens":200,"messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 1, MaxOutputTokens: 200}},
		{"clamped", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 1, MaxOutputTokens: 16}},
		{"legacy", `{"model":"m","functions":[{"name":"f"}],"logprobs":true,"messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 1, Legacy: true, Logprobs: true}},
		{"tools_beat_legacy", `{"model":"m","functions":[{"name":"f"}],"tools":[{"type":"function","function":{"name":"g"}}],"messages":[{"role":"user","content":"x"}]}`,
			ChatRequest{Model: "m", N: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseChat([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != tt.want.Model || r.Stream != tt.want.Stream || r.IncludeUsage != tt.want.IncludeUsage ||
				r.N != tt.want.N || strings.Join(r.Stop, "|") != strings.Join(tt.want.Stop, "|") ||
				r.Legacy != tt.want.Legacy || r.Logprobs != tt.want.Logprobs || r.MaxOutputTokens != tt.want.MaxOutputTokens {
				t.Fatalf("got %+v, want %+v", *r, tt.want)
			}
		})
	}
}

// TestToResponsesIdempotent: translating twice gives the same bytes, and neither parsing
// nor rendering touches the caller's body.
func TestToResponsesIdempotent(t *testing.T) {
	for _, in := range globCases(t, "testdata/requests/*.chat.json") {
		t.Run(caseName(in, ".chat.json"), func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			orig := bytes.Clone(body)
			r, err := ParseChat(body)
			if err != nil {
				return // error cases are covered by the goldens
			}
			opt := requestOptions(in)
			a, _ := r.ToResponses("up", opt)
			b, _ := r.ToResponses("up", opt)
			if !bytes.Equal(a, b) {
				t.Fatalf("two translations differ:\n%s\n%s", a, b)
			}
			r2, _ := ParseChat(body)
			c, _ := r2.ToResponses("up", opt)
			if !bytes.Equal(a, c) {
				t.Fatalf("re-parsing changes the translation")
			}
			if !bytes.Equal(body, orig) {
				t.Fatal("the input body was modified")
			}
			// The caller may reuse its buffer once ParseChat returned.
			for i := range body {
				body[i] = 'x'
			}
			if d, _ := r.ToResponses("up", opt); !bytes.Equal(a, d) {
				t.Fatal("the translation depends on the caller's buffer after ParseChat")
			}
			if !gjson.ValidBytes(a) {
				t.Fatalf("invalid JSON: %s", a)
			}
		})
	}
}

// Peer bugs on the request side (peers.md part b).
func TestPeerBugsRequest(t *testing.T) {
	body := []byte(`{"model":"m","temperature":0.7,"top_p":0.5,"max_tokens":321,
	 "tools":[{"type":"function","function":{"name":"a","strict":true,"parameters":{"type":"object"}}},{"type":"function","function":{"name":"b"}}],
	 "messages":[{"role":"user","content":"x"},
	  {"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"b","arguments":"{}"}}]},
	  {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"one"}]},
	  {"role":"tool","tool_call_id":"c2","content":"two"}]}`)
	r, err := ParseChat(body)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := r.ToResponses("up", RequestOptions{})
	j := gjson.ParseBytes(out)
	t.Run("function_call_output_is_string", func(t *testing.T) { // litellm#18201
		for _, o := range j.Get(`input.#(type=="function_call_output")#.output`).Array() {
			if o.Type != gjson.String {
				t.Fatalf("output %s is not a string", o.Raw)
			}
		}
	})
	t.Run("strict_preserved_and_explicit", func(t *testing.T) { // new-api drops strict
		if s := j.Get("tools.0.strict"); s.Type != gjson.True {
			t.Fatalf("tools.0.strict = %s", s.Raw)
		}
		if s := j.Get("tools.1.strict"); s.Type != gjson.False {
			t.Fatalf("tools.1.strict = %s, want explicit false", s.Raw)
		}
	})
	t.Run("sampling_and_max_tokens_forwarded", func(t *testing.T) { // CLIProxyAPI drops them
		if j.Get("temperature").Float() != 0.7 || j.Get("top_p").Float() != 0.5 || j.Get("max_output_tokens").Int() != 321 {
			t.Fatalf("got %s", out)
		}
	})
	t.Run("no_item_ids_on_replayed_calls", func(t *testing.T) {
		if j.Get(`input.#(type=="function_call").id`).Exists() {
			t.Fatalf("replayed function_call carries an id: %s", out)
		}
	})
	t.Run("store_explicit_false", func(t *testing.T) {
		if s := j.Get("store"); s.Type != gjson.False {
			t.Fatalf("store = %s", s.Raw)
		}
	})
}

func TestStreamingRequestDisablesObfuscation(t *testing.T) {
	r, err := ParseChat([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := r.ToResponses("", RequestOptions{})
	j := gjson.ParseBytes(out)
	if j.Get("model").Str != "m" || !j.Get("stream").Bool() || j.Get("stream_options.include_obfuscation").Type != gjson.False {
		t.Fatalf("got %s", out)
	}
}

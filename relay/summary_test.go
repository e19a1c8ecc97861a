package relay

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The substring shortcut of finishReason must not hide a tool call, however the output
// spells it, nor invent one from text that mentions one.
func TestFinishReasonToolCallShortcut(t *testing.T) {
	cases := []struct{ output, want string }{
		{`[{"type":"message","content":[{"type":"output_text","text":"hello"}]}]`, "stop"},
		{`[{"type":"message","content":[{"type":"output_text","text":"use a function_call here"}]}]`, "stop"},
		{`[{"type":"function\u005fcall","name":"f"}]`, "tool_calls"},
		{`[{"type":"\u0066unction_call","name":"f"}]`, "tool_calls"},
		{`[{"type":"message"},{"type":"custom_tool_call"}]`, "tool_calls"},
		{`[{"type":"message","content":[{"type":"output_text","text":"caf\u00e9"}]}]`, "stop"},
	}
	for _, tc := range cases {
		if got := finishReason("completed", "", gjson.Parse(tc.output)); got != tc.want {
			t.Errorf("finishReason(completed, %s) = %q, want %q", tc.output, got, tc.want)
		}
	}
}

// finishReason maps how a Responses answer ended to the chat vocabulary.
func TestFinishReason(t *testing.T) {
	cases := []struct {
		status, incomplete, output, want string
	}{
		{"completed", "", `[{"type":"message"}]`, "stop"},
		{"completed", "", `[{"type":"reasoning"},{"type":"function_call"}]`, "tool_calls"},
		{"completed", "", `[{"type":"custom_tool_call"}]`, "tool_calls"},
		{"incomplete", "max_output_tokens", `[]`, "length"},
		{"incomplete", "content_filter", `[]`, "content_filter"},
		{"incomplete", "", `[]`, "incomplete"},
		{"failed", "", `[]`, "error"},
		{"cancelled", "", `[]`, "cancelled"},
		{"", "", ``, ""},
	}
	for _, tc := range cases {
		if got := finishReason(tc.status, tc.incomplete, gjson.Parse(tc.output)); got != tc.want {
			t.Errorf("finishReason(%q, %q, %s) = %q, want %q", tc.status, tc.incomplete, tc.output, got, tc.want)
		}
	}
}

// Summarize reads the fields a trace keeps, and names the finish reason.
func TestSummarize(t *testing.T) {
	cases := []struct {
		obj  string
		want Summary
	}{
		{`{"id":"resp_1","object":"response","status":"completed","model":"m","output":[{"type":"function_call"}],"usage":{}}`,
			Summary{ID: "resp_1", Model: "m", FinishReason: "tool_calls", Output: `[{"type":"function_call"}]`}},
		{`{"id":"resp_2","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`,
			Summary{ID: "resp_2", FinishReason: "length"}},
		{`{"status":"failed","output":[]}`, Summary{FinishReason: "error", Output: `[]`}},
		{`not json`, Summary{}},
	}
	for _, tc := range cases {
		if got := Summarize(tc.obj); got != tc.want {
			t.Errorf("Summarize(%s) = %+v, want %+v", tc.obj, got, tc.want)
		}
	}
}

// Whatever the platform's answer holds, summarizing it does not panic, and what it names is
// the object's own text.
func FuzzSummarize(f *testing.F) {
	f.Add(`{"id":"resp_1","model":"m","status":"completed","output":[{"type":"function_call"}]}`)
	f.Add(`{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}`)
	f.Add(`{"output":"\u005fcall","status":"completed"}`)
	f.Add(`[1,2]`)
	f.Fuzz(func(t *testing.T, obj string) {
		s := Summarize(obj)
		if s.Output != "" && !strings.Contains(obj, s.Output) {
			t.Fatalf("output %q is not the object's", s.Output)
		}
	})
}

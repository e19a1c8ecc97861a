package proxy

import (
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

package translate

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestToolChoiceChecks(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	const fnA = `{"type":"function","function":{"name":"a"}}`
	const customB = `{"type":"custom","custom":{"name":"b"}}`
	tests := []struct {
		name, body string
		param      string // "" = accepted
	}{
		{"required_no_tools", `{"model":"m","tool_choice":"required",` + msgs + `}`, "tool_choice"},
		{"required_empty_tools", `{"model":"m","tools":[],"tool_choice":"required",` + msgs + `}`, "tool_choice"},
		{"required_with_tool", `{"model":"m","tools":[` + fnA + `],"tool_choice":"required",` + msgs + `}`, ""},
		{"required_with_legacy_functions", `{"model":"m","functions":[{"name":"a"}],"tool_choice":"required",` + msgs + `}`, ""},
		{"auto_no_tools", `{"model":"m","tool_choice":"auto",` + msgs + `}`, ""},
		{"none_no_tools", `{"model":"m","tool_choice":"none",` + msgs + `}`, ""},
		{"named_declared", `{"model":"m","tools":[` + fnA + `],"tool_choice":{"type":"function","function":{"name":"a"}},` + msgs + `}`, ""},
		{"named_flat_declared", `{"model":"m","tools":[` + fnA + `],"tool_choice":{"type":"function","name":"a"},` + msgs + `}`, ""},
		{"named_missing", `{"model":"m","tools":[` + fnA + `],"tool_choice":{"type":"function","function":{"name":"zz"}},` + msgs + `}`, "tool_choice"},
		{"named_no_tools", `{"model":"m","tool_choice":{"type":"function","function":{"name":"a"}},` + msgs + `}`, "tool_choice"},
		{"named_function_is_custom", `{"model":"m","tools":[` + customB + `],"tool_choice":{"type":"function","function":{"name":"b"}},` + msgs + `}`, "tool_choice"},
		{"named_custom_declared", `{"model":"m","tools":[` + fnA + `,` + customB + `],"tool_choice":{"type":"custom","custom":{"name":"b"}},` + msgs + `}`, ""},
		{"hosted_choice", `{"model":"m","tool_choice":{"type":"web_search"},` + msgs + `}`, ""},
		{"legacy_call_declared", `{"model":"m","functions":[{"name":"a"}],"function_call":{"name":"a"},` + msgs + `}`, ""},
		{"legacy_call_missing", `{"model":"m","functions":[{"name":"a"}],"function_call":{"name":"b"},` + msgs + `}`, "function_call"},
		{"legacy_call_auto", `{"model":"m","function_call":"auto",` + msgs + `}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseChat([]byte(tt.body))
			if tt.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var te *Error
			if !errors.As(err, &te) || te.Status != 400 || te.Param != tt.param || te.Code != codeInvalidValue {
				t.Fatalf("got %v, want a 400 on %s", err, tt.param)
			}
		})
	}
}

func TestCheckResponsesToolChoice(t *testing.T) {
	const fn = `[{"type":"function","name":"lookup","parameters":{}}]`
	tests := []struct {
		choice, tools string
		refused       bool
	}{
		{`"required"`, ``, true},
		{`"required"`, `[]`, true},
		{`"required"`, fn, false},
		{`"auto"`, ``, false},
		{`{"type":"function","name":"lookup"}`, fn, false},
		{`{"type":"function","name":"other"}`, fn, true},
		{`{"type":"function","name":"lookup"}`, ``, true},
		{`{"type":"web_search_preview"}`, ``, false},
		{`{"type":"allowed_tools","mode":"auto","tools":[]}`, fn, false},
		{`"required"`, `{}`, false}, // tools of the wrong type: the platform says so
		{``, ``, false},
	}
	for _, tt := range tests {
		err := CheckResponsesToolChoice(gjson.Parse(tt.choice), gjson.Parse(tt.tools))
		if (err != nil) != tt.refused {
			t.Errorf("choice %s tools %s: err %v, want refused %v", tt.choice, tt.tools, err, tt.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "tool") {
			t.Errorf("message %q", err)
		}
	}
}

// FuzzToolChoiceCheck: any tool_choice and tools, in either shape, are checked without a
// panic, and a refusal's message stays short and printable whatever name it echoes.
func FuzzToolChoiceCheck(f *testing.F) {
	f.Add(`"required"`, `[]`)
	f.Add(`{"type":"function","name":"a"}`, `[{"type":"function","name":"a"}]`)
	f.Add(`{"type":"function","function":{"name":"x'\n"}}`, `[{"type":"function","function":{"name":"y"}}]`)
	f.Add(`{"type":"custom","custom":{"name":"b"}}`, `[{"name":"b"}]`)
	f.Fuzz(func(t *testing.T, choice, tools string) {
		err := CheckResponsesToolChoice(gjson.Parse(choice), gjson.Parse(tools))
		if err == nil {
			return
		}
		msg := err.Error()
		if len(msg) > 300 {
			t.Fatalf("message of %d bytes", len(msg))
		}
		for _, r := range msg {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("unprintable message %q", msg)
			}
		}
	})
}

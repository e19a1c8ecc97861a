package translate

import (
	"errors"
	"testing"
)

// TestReadResponsesRequest: what a Responses body is refused for, with the code and param
// the client reads, and what passes.
func TestReadResponsesRequest(t *testing.T) {
	cases := []struct {
		name, body  string
		kept        bool
		code, param string // "" code: accepted
	}{
		{"plain", `{"model":"m","input":"hi"}`, false, "", ""},
		{"not an object", `[1]`, false, "invalid_json", ""},
		{"broken json", `{"model":`, false, "invalid_json", ""},
		{"model twice", `{"model":"m","model":"n","input":"hi"}`, false, "duplicate_parameter", "model"},
		{"no model", `{"input":"hi"}`, false, codeMissing, "model"},
		{"no input", `{"model":"m"}`, false, codeMissing, "input"},
		{"turn carried", `{"model":"m","previous_response_id":"resp_1"}`, false, "", ""},
		{"input a number", `{"model":"m","input":3}`, false, codeInvalidType, "input"},
		{"stream a string", `{"model":"m","input":"hi","stream":"yes"}`, false, codeInvalidType, "stream"},
		{"negative cap", `{"model":"m","input":"hi","max_output_tokens":-1}`, false, codeInvalidType, "max_output_tokens"},
		{"fractional cap", `{"model":"m","input":"hi","max_output_tokens":1.5}`, false, codeInvalidType, "max_output_tokens"},
		{"background a string", `{"model":"m","input":"hi","background":"y"}`, false, codeInvalidType, "background"},
		{"background unstored, not kept here", `{"model":"m","input":"hi","background":true,"store":false}`, false, "", ""},
		{"background unstored, kept here", `{"model":"m","input":"hi","background":true,"store":false}`, true, "invalid_value", "store"},
		{"background streamed, kept here", `{"model":"m","input":"hi","background":true,"stream":true}`, true, "unsupported_parameter", "stream"},
		{"background, kept here", `{"model":"m","input":"hi","background":true}`, true, "", ""},
		{"tool_choice undeclared", `{"model":"m","input":"hi","tool_choice":{"type":"function","name":"f"}}`, false, "invalid_value", "tool_choice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f ResponsesFields
			err := ReadResponsesRequest([]byte(tc.body), &f, tc.kept)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if f.Model.Str != "m" {
					t.Errorf("the fields were not scanned: model %q", f.Model.Str)
				}
				return
			}
			var te *Error
			if !errors.As(err, &te) || te.Status != 400 || te.Code != tc.code || te.Param != tc.param {
				t.Fatalf("got %#v, want 400 %s on %q", err, tc.code, tc.param)
			}
		})
	}
}

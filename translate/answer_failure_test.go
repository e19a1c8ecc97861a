package translate

import (
	"errors"
	"testing"
)

// A final response that failed, was cancelled, carries an error or has not finished is an
// error in every dialect, the same one: the answer is never rendered from its output.
func TestResponseFailureSameInEveryDialect(t *testing.T) {
	const out = `,"output":[{"type":"message","content":[{"type":"output_text","text":"partial"}]}]`
	cases := []struct {
		name, resp string
		status     int
		code       string
	}{
		{"failed_without_error", `{"id":"resp_1","status":"failed"` + out + `}`, 502, "response_failed"},
		{"cancelled", `{"id":"resp_1","status":"cancelled"` + out + `}`, 502, "response_cancelled"},
		{"failed_with_error", `{"id":"resp_1","status":"failed","error":{"code":"rate_limit_exceeded","message":"slow down"}` + out + `}`, 0, "rate_limit_exceeded"},
		{"completed_with_error", `{"id":"resp_1","status":"completed","error":{"code":"server_error","message":"boom"}` + out + `}`, 0, "server_error"},
		{"in_progress", `{"id":"resp_1","status":"in_progress"` + out + `}`, 502, "response_not_finished"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, chatErr := ResponseToChat([]byte(tc.resp), baseMeta())
			_, _, msgErr := ResponseToMessage([]byte(tc.resp), baseMessagesMeta())
			for dialect, err := range map[string]error{"chat": chatErr, "messages": msgErr} {
				var te *Error
				if !errors.As(err, &te) {
					t.Fatalf("%s: error %v, want a *Error", dialect, err)
				}
				if te.Code != tc.code || (tc.status != 0 && te.HTTPStatus() != tc.status) {
					t.Errorf("%s: %d %q, want %d %q", dialect, te.HTTPStatus(), te.Code, tc.status, tc.code)
				}
			}
			if chatErr.Error() != msgErr.Error() {
				t.Errorf("the dialects differ: chat %q, messages %q", chatErr, msgErr)
			}
		})
	}
}

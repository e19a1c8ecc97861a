package translate

import "testing"

// Anthropic's SDKs pick the exception class by status and retry 429, 5xx and 529: every
// status the gateway answers with maps to the pair those clients expect.
func TestAnthropicStatus(t *testing.T) {
	tests := []struct {
		in, status int
		typ        string
	}{
		{400, 400, "invalid_request_error"}, {401, 401, "authentication_error"},
		{402, 402, "billing_error"}, {403, 403, "permission_error"}, {404, 404, "not_found_error"},
		{413, 413, "request_too_large"}, {422, 422, "invalid_request_error"},
		{429, 429, "rate_limit_error"}, {500, 500, "api_error"}, {502, 500, "api_error"},
		{503, 529, "overloaded_error"}, {529, 529, "overloaded_error"}, {504, 504, "timeout_error"},
		{200, 500, "api_error"},
	}
	for _, tc := range tests {
		if status, typ := AnthropicStatus(tc.in); status != tc.status || typ != tc.typ {
			t.Errorf("AnthropicStatus(%d) = %d %s, want %d %s", tc.in, status, typ, tc.status, tc.typ)
		}
	}
}

package translate

// AnthropicStatus maps an HTTP status to the status and error type an Anthropic client
// expects: Anthropic's SDKs pick their exception classes by status, and retry 429, 5xx and
// 529. A platform that is overloaded or unavailable is 529 overloaded_error; other server
// faults are 500 api_error, except a timeout.
func AnthropicStatus(status int) (int, string) {
	for _, kept := range [...]struct {
		status int
		typ    string
	}{
		{400, "invalid_request_error"}, {401, "authentication_error"}, {402, "billing_error"},
		{403, "permission_error"}, {404, "not_found_error"}, {413, "request_too_large"},
		{429, "rate_limit_error"}, {504, "timeout_error"},
	} {
		if status == kept.status {
			return status, kept.typ
		}
	}
	switch {
	case status == 503 || status == 529:
		return 529, "overloaded_error"
	case status >= 400 && status < 500:
		return status, "invalid_request_error"
	}
	return 500, "api_error"
}

// AnthropicErrorJSON renders {"type":"error","error":{"type":typ,"message":msg}}.
func AnthropicErrorJSON(typ, msg string) []byte {
	return AppendAnthropicError(make([]byte, 0, 64+len(msg)), typ, msg)
}

// AppendAnthropicError appends the Anthropic error object to b.
func AppendAnthropicError(b []byte, typ, msg string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	return append(b, "}}"...)
}

package platform

import (
	"encoding/json"
)

// Envelope is the platform's answer shape on /api/open/v2: code 0 is success.
// Data stays raw so that money fields (decimal strings) and unknown fields pass through untouched.
type Envelope struct {
	Code int             `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Envelope codes seen in the specification.
const (
	CodeOK          = 0
	CodeBusiness    = 1  // parameter errors, not found, no permission
	CodeNotLoggedIn = 2  // credential rejected
	CodeFailure     = -1 // query failed
	CodeSystem      = -2 // system exception
)

// AltError is the specification's alternative error shape: {code, message, data:{error, details, field}}.
type AltError struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Data    struct {
		Error   string          `json:"error"`
		Details json.RawMessage `json:"details"`
		Field   string          `json:"field"`
	} `json:"data"`
}

// ParseError reads whichever of the two error shapes body carries. ok is false when body is
// neither (for example HTML from a load balancer).
func ParseError(body []byte) (code int, msg string, ok bool) {
	var probe struct {
		Code    json.RawMessage `json:"code"`
		Msg     *string         `json:"msg"`
		Message *string         `json:"message"`
	}
	if json.Unmarshal(body, &probe) != nil || probe.Code == nil {
		return 0, "", false
	}
	if err := json.Unmarshal(probe.Code, &code); err != nil {
		code = CodeFailure // alternative shape may carry a string code
	}
	switch {
	case probe.Msg != nil:
		return code, *probe.Msg, true
	case probe.Message != nil:
		return code, *probe.Message, true
	}
	return code, "", true
}

package translate

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Error is a failure the proxy answers in the OpenAI error shape. Status 0 means 400.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *Error) Error() string {
	if e.Param != "" {
		return e.Message + " (param " + e.Param + ")"
	}
	return e.Message
}

// HTTPStatus is Status with the zero value resolved.
func (e *Error) HTTPStatus() int {
	if e.Status == 0 {
		return 400
	}
	return e.Status
}

// JSON renders the error as {"error":{message,type,param,code}}.
func (e *Error) JSON() []byte {
	return appendErrorObject(make([]byte, 0, 96+len(e.Message)), e.Message, e.Type, e.Param, e.Code)
}

const (
	typeInvalidRequest = "invalid_request_error"
	typeServer         = "server_error"

	codeInvalidValue     = "invalid_value"
	codeInvalidType      = "invalid_type"
	codeMissing          = "missing_required_parameter"
	codeUnsupportedValue = "unsupported_value"
)

// missing is the error for a required parameter the request lacks; param is its path.
func missing(param string) *Error {
	return badRequest(codeMissing, param, "Missing required parameter: '"+param+"'.")
}

func badRequest(code, param, msg string) *Error {
	return &Error{Status: 400, Type: typeInvalidRequest, Code: code, Param: param, Message: msg}
}

// appendErrorObject writes {"error":{...}} with empty param and code as null, which is what
// the OpenAI SDKs expect.
func appendErrorObject(b []byte, message, typ, param, code string) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, message)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":`...)
	b = appendStringOrNull(b, param)
	b = append(b, `,"code":`...)
	b = appendStringOrNull(b, code)
	return append(b, "}}"...)
}

// failureStatus maps a Responses error code (response.failed, error events) to the HTTP
// status and error type a Chat client gets on the non-stream path (mapping doc 5.7).
// server_error becomes 502 rather than 500: the fault is upstream, not in modelgate.
func failureStatus(code string) (int, string) {
	switch {
	case code == "rate_limit_exceeded" || code == "too_many_requests":
		return 429, "rate_limit_error"
	case code == "insufficient_quota" || code == "credit_balance_exhausted":
		return 429, "insufficient_quota"
	case code == "server_error":
		return 502, typeServer
	case code == "vector_store_timeout":
		return 504, typeServer
	case code == "invalid_prompt", code == "data_residency_mismatch", code == "bio_policy",
		code == "context_length_exceeded", code == "invalid_base64_image",
		code == "unsupported_image_media_type", code == "empty_image_file",
		code == "failed_to_download_image",
		strings.HasPrefix(code, "invalid_image"), strings.HasPrefix(code, "image_"):
		return 400, typeInvalidRequest
	}
	return 500, typeServer
}

// failureError builds the Error for a failed response or an error event. obj is either the
// nested error object or the flat event itself; both carry code/message/type/param.
func failureError(obj gjson.Result) *Error {
	code := scalarString(obj.Get("code"))
	status, typ := failureStatus(code)
	if t := obj.Get("type"); t.Type == gjson.String && t.Str != "error" && t.Str != "" {
		typ = t.Str
	}
	msg := cleanMessage(obj.Get("message").String())
	if msg == "" {
		msg = "The upstream model failed to produce a response."
	}
	// Cloned: obj may view a buffer the caller reuses, and an Aggregator keeps the error.
	return &Error{Status: status, Type: strings.Clone(typ), Code: strings.Clone(code),
		Param: strings.Clone(scalarString(obj.Get("param"))), Message: strings.Clone(msg)}
}

// scalarString renders a string or number JSON value as text; anything else is "".
func scalarString(r gjson.Result) string {
	switch r.Type {
	case gjson.String:
		return r.Str
	case gjson.Number:
		return r.Raw
	}
	return ""
}

// maxErrorMessage caps relayed upstream messages: they end up in client logs and UIs.
const maxErrorMessage = 2048

// UpstreamErrorToOpenAI normalises whatever error body the upstream sent with a non-2xx
// status into {"error":{message,type,param,code}}. Upstream bodies come in several shapes
// (the OpenAI shape, the platform envelope {code,msg}, the alternative {code,message,data},
// HTML from a load balancer, nothing at all); clients only understand the OpenAI one.
// HTML and stack traces are never relayed: they leak internals and help no client.
func UpstreamErrorToOpenAI(status int, body []byte) []byte {
	typ := typeForStatus(status)
	var msg, param, code string
	if ValidJSON(body) { // bounded nesting, as for every body the platform sends
		root := gjson.ParseBytes(body)
		e := root.Get("error")
		switch {
		case e.IsObject():
			msg = e.Get("message").String()
			if t := e.Get("type"); t.Type == gjson.String && t.Str != "" {
				typ = t.Str
			}
			param = scalarString(e.Get("param"))
			code = scalarString(e.Get("code"))
		case e.Type == gjson.String:
			msg = e.Str
			code = scalarString(root.Get("code"))
		case root.IsObject():
			// Platform envelope {code,msg} or the alternative {code,message,data:{error,field}}.
			msg = root.Get("msg").String()
			if msg == "" {
				msg = root.Get("message").String()
			}
			if d := root.Get("data.error"); d.Type == gjson.String && d.Str != "" && d.Str != msg {
				if msg == "" {
					msg = d.Str
				} else {
					msg += ": " + d.Str
				}
			}
			param = root.Get("data.field").String()
			code = scalarString(root.Get("code"))
			if t := root.Get("type"); t.Type == gjson.String && t.Str != "" {
				typ = t.Str
			}
		}
	}
	msg = cleanMessage(msg)
	if msg == "" {
		msg = "The platform answered with HTTP status " + strconv.Itoa(status) + "."
	}
	out := make([]byte, 0, 96+len(msg)+len(param)+len(code))
	return appendErrorObject(out, msg, typ, capString(param, 256), capString(code, 256))
}

func typeForStatus(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500 || status < 400:
		return typeServer
	}
	return typeInvalidRequest
}

// cleanMessage drops HTML and stack traces, keeps the first meaningful line, and caps it.
func cleanMessage(s string) string {
	s = strings.TrimSpace(s)
	low := strings.ToLower(s[:min(len(s), 512)])
	if strings.Contains(low, "<html") || strings.Contains(low, "<!doctype") || strings.Contains(low, "<body") {
		return ""
	}
	for _, marker := range stackMarkers {
		if i := strings.Index(s, marker); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
	}
	return capString(s, maxErrorMessage)
}

var stackMarkers = [...]string{"\nTraceback", "\n\tat ", "\n    at ", "\ngoroutine ", "\n  File \"", "\npanic:"}

// capString cuts s to at most n bytes on a rune boundary.
func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

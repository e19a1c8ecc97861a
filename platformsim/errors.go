package platformsim

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// openAIError is the gateway's error body: {"error":{"message","type","param","code"}}.
func openAIError(e *apiError) []byte {
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": e.message, "type": e.typ, "param": nullable(e.param), "code": nullable(e.code),
	}})
	return b
}

func errorAnswer(e *apiError) answer {
	return answer{status: e.status, header: http.Header{"Content-Type": {"application/json"}}, body: openAIError(e)}
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, openAIError(e))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Platform envelope codes.
const (
	codeOK          = 0
	codeBusiness    = 1
	codeNotLoggedIn = 2
	codeFailure     = -1
	codeSystem      = -2
)

// envelope is the /api/open/v2 answer shape; data is omitted when nil.
func envelope(code int, msg string, data any) []byte {
	v := struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
		Data any    `json:"data,omitempty"`
	}{code, msg, data}
	b, _ := json.Marshal(v)
	return b
}

func writeEnvelope(w http.ResponseWriter, status, code int, msg string, data any) {
	writeJSON(w, status, envelope(code, msg, data))
}

func envelopeAnswer(status, code int, msg string, data any) answer {
	return answer{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: envelope(code, msg, data)}
}

// altErrorAnswer is the platform's alternative error shape {code, message, data:{error, details, field}}.
func altErrorAnswer(status, code int, message, errName, field string) answer {
	b, _ := json.Marshal(map[string]any{"code": code, "message": message,
		"data": map[string]any{"error": errName, "details": nil, "field": field}})
	return answer{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: b}
}

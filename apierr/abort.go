package apierr

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/relay"
	"modelgate/reqlog"
	"modelgate/sidecar"
	"modelgate/translate"
)

// OpenAI error types used on /v1 routes.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeNotFound       = "not_found_error"
	TypeServer         = "server_error"
	TypeQuota          = "insufficient_quota"
)

// OpenAIJSON renders {"error":{...}} around the one error object (relay.ErrorObject); empty
// param and code become null, as OpenAI sends them.
func OpenAIJSON(typ, code, param, msg string) []byte {
	obj := relay.ErrorObject(typ, code, param, msg)
	b := make([]byte, 0, len(`{"error":}`)+len(obj))
	return append(append(append(b, `{"error":`...), obj...), '}')
}

// Abort answers with an error in the shape of the route's clients (OpenAI's, Anthropic's,
// Google's, or the platform's envelope on the sidecar routes) and stops the handler chain.
// Callers give the OpenAI terms; the other shapes map them.
func Abort(c *gin.Context, status int, typ, code, param, msg string) {
	switch Of(c) {
	case Anthropic:
		abortAnthropic(c, status, code, msg)
		return
	case Google:
		abortGoogle(c, status, code, msg)
		return
	case Envelope:
		AbortEnvelope(c, status, envelopeCode(code), msg)
		refused(c, code)
		return
	}
	PeekLimits(c)
	refused(c, code)
	c.Data(status, "application/json", OpenAIJSON(typ, code, param, msg))
	c.Abort()
}

// AbortEnvelope answers a sidecar route with the platform's envelope.
func AbortEnvelope(c *gin.Context, status, code int, msg string) {
	refused(c, strconv.Itoa(code))
	c.Data(status, "application/json", sidecar.Envelope(code, msg))
	c.Abort()
}

// abortAnthropic answers with {"type":"error","error":{"type","message"}} and Anthropic's
// status for the kind of failure; code is what logs and metrics record, as on the other routes.
func abortAnthropic(c *gin.Context, status int, code, msg string) {
	PeekLimits(c)
	refused(c, code)
	st, typ := translate.AnthropicStatus(status)
	c.Data(st, "application/json", translate.AnthropicErrorJSON(typ, msg))
	c.Abort()
}

// NotFound is the /v1 routes' answer to a path no route serves.
func NotFound(c *gin.Context) {
	Abort(c, http.StatusNotFound, TypeInvalidRequest, "unknown_url",
		"", "Unknown request URL: "+c.Request.Method+" "+SanitizePath(c.Request.URL.Path)+".")
}

// SanitizePath keeps error messages short and printable whatever the caller put in the
// path (or in an id it names).
func SanitizePath(p string) string { return reqlog.Printable(p, 200) }

// FormatBytes states a size limit in the words of a refusal: MiB or KiB when it is a whole
// number of them, else bytes.
func FormatBytes(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// Untranslatable answers a request translate refused in the route's shape: a *translate.Error
// with its status, type, code, param and message (400 and invalid_request_error where it
// gives none); any other error as a 400 invalid_request.
func Untranslatable(c *gin.Context, err error) {
	var te *translate.Error
	if !errors.As(err, &te) {
		Abort(c, http.StatusBadRequest, TypeInvalidRequest, "invalid_request", "", "The request could not be translated.")
		return
	}
	status, typ := te.Status, te.Type
	if status == 0 {
		status = http.StatusBadRequest
	}
	if typ == "" {
		typ = TypeInvalidRequest
	}
	Abort(c, status, typ, te.Code, te.Param, te.Message)
}

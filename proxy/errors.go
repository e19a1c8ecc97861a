package proxy

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/relay"
	"modelgate/reqlog"
	"modelgate/sidecar"
)

// OpenAI error types used on /v1 routes.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeNotFound       = "not_found_error"
	typeServer         = "server_error"
	typeQuota          = "insufficient_quota"
)

// openAIErrorJSON renders {"error":{...}} around the one error object (relay.ErrorObject);
// empty param and code become null, as OpenAI sends them.
func openAIErrorJSON(typ, code, param, msg string) []byte {
	obj := relay.ErrorObject(typ, code, param, msg)
	b := make([]byte, 0, len(`{"error":}`)+len(obj))
	return append(append(append(b, `{"error":`...), obj...), '}')
}

// abortError answers with an error in the shape of the route's clients (OpenAI's,
// Anthropic's, or the platform's envelope on the sidecar routes; see shape.go) and stops the
// handler chain. Callers give the OpenAI terms; the other shapes map them.
func abortError(c *gin.Context, status int, typ, code, param, msg string) {
	switch shapeOf(c) {
	case shapeAnthropic:
		abortAnthropic(c, status, code, msg)
		return
	case shapeEnvelope:
		abortEnvelope(c, status, envelopeCode(code), msg)
		info(c).ErrCode = code
		return
	}
	peekLimitHeaders(c)
	info(c).ErrCode = code
	c.Data(status, "application/json", openAIErrorJSON(typ, code, param, msg))
	c.Abort()
}

// abortEnvelope answers a sidecar route with the platform's envelope.
func abortEnvelope(c *gin.Context, status, code int, msg string) {
	info(c).ErrCode = strconv.Itoa(code)
	c.Data(status, "application/json", sidecar.Envelope(code, msg))
	c.Abort()
}

// statusClientClosedRequest is what access logs record when the client left first (nginx's 499).
const statusClientClosedRequest = 499

func notFoundOpenAI(c *gin.Context) {
	abortError(c, http.StatusNotFound, typeInvalidRequest, "unknown_url",
		"", "Unknown request URL: "+c.Request.Method+" "+sanitizePath(c.Request.URL.Path)+".")
}

// sanitizePath keeps error messages short and printable whatever the caller put in the path.
func sanitizePath(p string) string { return printable(p, 200) }

// maxLoggedModel caps the client-chosen model name in logs and metrics.
const maxLoggedModel = 128

// printable returns at most max bytes of s with anything outside printable ASCII replaced.
func printable(p string, max int) string { return reqlog.Printable(p, max) }

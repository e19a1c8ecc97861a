package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/reqlog"
)

// The error answers are apierr's (one shape per route); these are the names proxy's
// handlers write them by.
const (
	typeInvalidRequest = apierr.TypeInvalidRequest
	typeServer         = apierr.TypeServer
)

// abortError answers with an error in the shape of the route's clients and stops the
// handler chain (apierr.Abort). The request's info is made first, so that a handler
// reached without the middleware (tests) still records the refusal's code.
func abortError(c *gin.Context, status int, typ, code, param, msg string) {
	info(c)
	apierr.Abort(c, status, typ, code, param, msg)
}

// statusClientClosedRequest is what access logs record when the client left first (nginx's 499).
const statusClientClosedRequest = 499

// maxLoggedModel caps the client-chosen model name in logs and metrics.
const maxLoggedModel = 128

// printable returns at most max bytes of s with anything outside printable ASCII replaced.
func printable(p string, max int) string { return reqlog.Printable(p, max) }

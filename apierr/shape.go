// Package apierr writes modelgate's own refusals in the shape of the route's clients:
// OpenAI's {"error":{...}} on the /v1 routes, Anthropic's on /v1/messages, Google's on the
// Gemini API's routes, and the platform's {code,msg,data} envelope on the sidecar routes. A route names its shape once,
// first in its chain (Mark), and every answer path after it (the shared middleware, the
// preflight, the handlers of proxy and of the route packages) writes through Abort, so no
// answer path takes a flag for it.
package apierr

import (
	"github.com/gin-gonic/gin"

	"modelgate/platform"
)

// Shape is the shape a route's clients read errors in.
type Shape uint8

const (
	OpenAI    Shape = iota // /v1 routes: OpenAI's {"error":{...}} (the default)
	Anthropic              // /v1/messages, and /v1/models asked by an Anthropic SDK
	Envelope               // the sidecar routes: the platform's {code,msg,data} envelope
	Google                 // the Gemini routes, and /v1/models asked by a Gemini client
)

// shapeKey is the gin context key of a route's error shape; absent means OpenAI's.
const shapeKey = "modelgate.shape"

// Mark names the error shape of c's route.
func Mark(c *gin.Context, s Shape) { c.Set(shapeKey, s) }

// MarkEnvelope runs first on the sidecar routes.
func MarkEnvelope(c *gin.Context) { Mark(c, Envelope) }

// Of is the error shape of c's route.
func Of(c *gin.Context) Shape {
	if v, ok := c.Get(shapeKey); ok {
		return v.(Shape)
	}
	return OpenAI
}

// SpeaksAnthropic reports whether the route's clients read Anthropic's shapes.
func SpeaksAnthropic(c *gin.Context) bool { return Of(c) == Anthropic }

// envelopeCode is the platform envelope's code for a refusal modelgate writes on a sidecar
// route, by the OpenAI code it carries elsewhere: a rejected key is the platform's "not
// logged in", a shutdown its system error, and every limit a failed query.
func envelopeCode(code string) int {
	switch code {
	case "invalid_api_key":
		return platform.CodeNotLoggedIn
	case "shutting_down":
		return platform.CodeSystem
	}
	return platform.CodeFailure
}

// UnauthorizedMessage is what a caller with a missing or rejected key is told, in the words
// of its route's clients.
func UnauthorizedMessage(c *gin.Context, missing bool) string {
	switch Of(c) {
	case Anthropic:
		if missing {
			return "x-api-key header is required (or Authorization: Bearer <key>)"
		}
		return "invalid x-api-key"
	case Envelope:
		if missing {
			return "missing API key: send it in the Authorization header as 'Bearer <key>'"
		}
		return "invalid API key"
	case Google:
		if missing {
			return "Method doesn't allow unregistered callers. Send an API key as the x-goog-api-key header, ?key= or Authorization: Bearer <key>."
		}
		return "API key not valid. Please pass a valid API key."
	}
	if missing {
		return "You didn't provide an API key. Send it in the Authorization header as 'Bearer <key>'."
	}
	return "Incorrect API key provided."
}

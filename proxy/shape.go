package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/platform"
)

// errorShape is the shape a route's clients read errors in. Every refusal the shared
// middleware and the preflight write (drain, auth, limits, spend, bad input) goes through
// abortError, which writes it in the route's shape: a route names its shape once, first in
// its chain, and no answer path takes a flag for it.
type errorShape uint8

const (
	shapeOpenAI    errorShape = iota // /v1 routes: OpenAI's {"error":{...}} (the default)
	shapeAnthropic                   // /v1/messages, and /v1/models asked by an Anthropic SDK
	shapeEnvelope                    // the sidecar routes: the platform's {code,msg,data} envelope
)

// shapeKey is the gin context key of a route's error shape; absent means OpenAI's.
const shapeKey = "modelgate.shape"

// shapeOf is the error shape of c's route.
func shapeOf(c *gin.Context) errorShape {
	if v, ok := c.Get(shapeKey); ok {
		return v.(errorShape)
	}
	return shapeOpenAI
}

// speaksAnthropic reports whether the route's clients read Anthropic's shapes.
func speaksAnthropic(c *gin.Context) bool { return shapeOf(c) == shapeAnthropic }

// markEnvelope runs first on the sidecar routes.
func markEnvelope(c *gin.Context) { c.Set(shapeKey, shapeEnvelope) }

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

// unauthorizedMessage is what a caller with a missing or rejected key is told, in the words
// of its route's clients.
func unauthorizedMessage(c *gin.Context, missing bool) string {
	switch shapeOf(c) {
	case shapeAnthropic:
		if missing {
			return "x-api-key header is required (or Authorization: Bearer <key>)"
		}
		return "invalid x-api-key"
	case shapeEnvelope:
		if missing {
			return "missing API key: send it in the Authorization header as 'Bearer <key>'"
		}
		return "invalid API key"
	}
	if missing {
		return "You didn't provide an API key. Send it in the Authorization header as 'Bearer <key>'."
	}
	return "Incorrect API key provided."
}

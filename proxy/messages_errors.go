package proxy

import (
	"strings"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
)

// The Messages routes share every check of the /v1 routes (drain, auth, body limits,
// admission, allow-lists, upstream failures); only the shape of what a client is told
// differs. markAnthropic names the route's error shape first (apierr), and the shared
// answer paths (abortError, writeFailure, the limit headers) answer in it.

// markAnthropic runs before the /v1/messages middleware chain.
func (s *Server) markAnthropic(c *gin.Context) {
	apierr.Mark(c, apierr.Anthropic)
	// Anthropic's SDKs read request-id; X-Request-Id stays for everything else.
	c.Header("request-id", info(c).RequestID)
}

// markAnthropicModels runs first on the /v1 group: the Anthropic SDKs list models with
// GET /v1/models, the same path as OpenAI's, and say who they are with an
// anthropic-version header. Such a request authenticates by x-api-key and gets Anthropic's
// model objects (modelsapi); anything else is answered as before.
func (s *Server) markAnthropicModels(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, "/v1/models") && c.GetHeader("Anthropic-Version") != "" {
		s.markAnthropic(c)
	}
}

// authorization is the credential of a request in Authorization-header form. Anthropic
// clients send their key as x-api-key (or as a bearer token when configured with one); an
// x-api-key wins, since it is what the SDKs send by default.
func authorization(c *gin.Context, anthropic bool) string {
	if anthropic {
		if k := c.GetHeader("X-Api-Key"); k != "" {
			return "Bearer " + k
		}
	}
	return c.GetHeader("Authorization")
}

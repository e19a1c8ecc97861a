package proxy

import (
	"net/http"
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

// markModelsShape runs first on the /v1 group. The Anthropic SDKs list models with
// GET /v1/models, the same path as OpenAI's, and say who they are with an anthropic-version
// header: such a request authenticates by x-api-key and gets Anthropic's model objects
// (modelsapi). The Gemini SDKs use the same paths with apiVersion v1 and send
// x-goog-api-client (or x-goog-api-key): they get Google's, as does every POST under
// /v1/models/ (generateContent, ...) and anything under /v1/tunedModels/. Anything else is
// answered as before.
func (s *Server) markModelsShape(c *gin.Context) {
	switch path := c.Request.URL.Path; {
	case strings.HasPrefix(path, "/v1/tunedModels/"):
		apierr.MarkGoogle(c)
	case path != "/v1/models" && !strings.HasPrefix(path, "/v1/models/"):
	case c.Request.Method == http.MethodPost:
		apierr.MarkGoogle(c)
	case c.GetHeader("Anthropic-Version") != "":
		s.markAnthropic(c)
	case apierr.IsGoogleClient(c.Request.Header):
		apierr.MarkGoogle(c)
	}
}

// authorization is the credential of a request in Authorization-header form. Anthropic
// clients send their key as x-api-key (or as a bearer token when configured with one); an
// x-api-key wins, since it is what the SDKs send by default. Gemini clients send theirs as
// x-goog-api-key (the SDKs, the CLI), else ?key= (Google's REST examples; apierr.MarkGoogle
// took it out of the URL), else as a bearer token.
func authorization(c *gin.Context) string {
	switch apierr.Of(c) {
	case apierr.Anthropic:
		if k := c.GetHeader("X-Api-Key"); k != "" {
			return "Bearer " + k
		}
	case apierr.Google:
		if k := c.GetHeader("X-Goog-Api-Key"); k != "" {
			return "Bearer " + k
		}
		if k := apierr.QueryKey(c); k != "" {
			return "Bearer " + k
		}
	}
	return c.GetHeader("Authorization")
}

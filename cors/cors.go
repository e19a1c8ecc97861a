// Package cors lets browser apps call the /v1 routes (and the Gemini API's /v1beta) from the
// origins listed in server.cors_origins. It is off unless configured, because a browser page that can reach
// modelgate spends its platform keys. Only /v1 paths are ever answered with CORS headers:
// admin and sidecar routes stay same-origin whatever the config says.
package cors

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// allowedHeaders are the request headers a preflight may ask for by exact name. The
// Anthropic SDK sends anthropic-dangerous-direct-browser-access from a browser page.
var allowedHeaders = []string{
	"authorization", "content-type", "content-encoding", "x-api-key",
	"anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access", "x-request-id",
	"x-goog-api-key", "x-goog-api-client", // the Gemini SDK's key and client
}

// allowedHeaderFamilies are header name prefixes the official SDKs grow over time
// (openai-organization, openai-project, x-stainless-retry-count, ...): any requested name
// under one of them is allowed.
var allowedHeaderFamilies = []string{"openai-", "x-stainless-"}

// exposedHeaders are the answer headers a browser script may read: the request id, the
// rate-limit headers of both dialects and Retry-After; the server adds its own (New).
// Headers a given answer does not carry are simply absent.
var exposedHeaders = []string{
	"x-request-id", "retry-after", "x-should-retry",
	"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
	"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
	"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset",
	"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset",
	"anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset",
	"anthropic-ratelimit-output-tokens-limit", "anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset",
	"request-id",
}

const (
	// PreflightRoute is the route logs and metrics give a preflight: one fixed value
	// whatever the path, kept out of route=~"/v1/.*" queries of real traffic.
	PreflightRoute = "/v1 preflight"
	allowedMethods = "GET, POST, DELETE, OPTIONS"
	// maxAge lets a browser reuse a preflight for ten minutes: long enough to spare a
	// round trip per request, short enough that a config change is seen soon.
	maxAge = "600"
)

// isPath reports whether path is one that may get CORS headers: /v1, /v1beta (the Gemini
// API) and below.
func isPath(path string) bool {
	return path == "/v1" || strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v1beta/")
}

// Policy is the CORS middleware of one server.
type Policy struct {
	origins   func() []string
	exposed   string
	preflight func(c *gin.Context)
}

// New is the middleware for the origins origins returns (server.cors_origins of the config
// in force, read on every request so a reload applies at once). exposed are the server's
// own answer headers a script may read besides the standard ones; preflight is called on
// each preflight answered or refused, to give it PreflightRoute in the request's record.
func New(origins func() []string, exposed []string, preflight func(c *gin.Context)) *Policy {
	return &Policy{origins: origins, exposed: strings.Join(append(slices.Clone(exposedHeaders), exposed...), ", "), preflight: preflight}
}

// Handle runs before routing and authentication, so a preflight (which never carries
// credentials) is answered for every /v1 route, including routes added later.
func (p *Policy) Handle(c *gin.Context) {
	origins := p.origins()
	if len(origins) == 0 || !isPath(c.Request.URL.Path) {
		return
	}
	h := c.Writer.Header()
	// The answer depends on the Origin header whenever CORS is on, allowed or not: a shared
	// cache must not hand one origin's answer to another.
	h.Add("Vary", "Origin")
	origin := c.Request.Header.Get("Origin")
	allowed := origin != "" && OriginAllowed(origins, origin)
	preflight := c.Request.Method == http.MethodOptions && c.Request.Header.Get("Access-Control-Request-Method") != ""
	if !allowed {
		if preflight {
			// No CORS headers: the browser refuses the call and it never reaches a handler.
			p.preflight(c)
			c.AbortWithStatus(http.StatusForbidden)
		}
		return
	}
	if origins[0] == "*" {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if !preflight {
		h.Set("Access-Control-Expose-Headers", p.exposed)
		return
	}
	p.preflight(c)
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", allowedMethods)
	if hs := allowHeaders(c.Request.Header.Values("Access-Control-Request-Headers")); hs != "" {
		h.Set("Access-Control-Allow-Headers", hs)
	}
	h.Set("Access-Control-Max-Age", maxAge)
	c.AbortWithStatus(http.StatusNoContent)
}

// OriginAllowed reports whether origin may call (or open a WebSocket) under origins.
func OriginAllowed(origins []string, origin string) bool {
	return origins[0] == "*" || slices.Contains(origins, origin)
}

// allowHeaders echoes the requested headers modelgate accepts, lowercased; the browser
// refuses the call when one it needs is missing from the list.
func allowHeaders(requested []string) string {
	var b strings.Builder
	for _, line := range requested {
		for name := range strings.SplitSeq(line, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if !headerAllowed(name) {
				continue
			}
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(name)
		}
	}
	return b.String()
}

func headerAllowed(name string) bool {
	if slices.Contains(allowedHeaders, name) {
		return true
	}
	for _, fam := range allowedHeaderFamilies {
		if len(name) > len(fam) && strings.HasPrefix(name, fam) && validHeaderName(name) {
			return true
		}
	}
	return false
}

// validHeaderName keeps an echoed name to token characters, so nothing a page sends can
// shape the answer's headers beyond naming a header.
func validHeaderName(name string) bool {
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9', ch == '-', ch == '_', ch == '.':
		default:
			return false
		}
	}
	return true
}

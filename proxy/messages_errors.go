package proxy

import (
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/ratelimit"
	"modelgate/translate"
)

// The Messages routes share every check of the /v1 routes (drain, auth, body limits,
// admission, allow-lists, upstream failures); only the shape of what a client is told
// differs. markAnthropic names the route's error shape first (shape.go), and the shared
// answer paths (abortError, writeFailure, the limit headers) answer in it.

// markAnthropic runs before the /v1/messages middleware chain.
func (s *Server) markAnthropic(c *gin.Context) {
	c.Set(shapeKey, shapeAnthropic)
	// Anthropic's SDKs read request-id; X-Request-Id stays for everything else.
	c.Header("request-id", info(c).RequestID)
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

// abortAnthropic answers with {"type":"error","error":{"type","message"}} and Anthropic's
// status for the kind of failure; code is what logs and metrics record, as on the other routes.
func abortAnthropic(c *gin.Context, status int, code, msg string) {
	peekLimitHeaders(c)
	info(c).ErrCode = code
	st, typ := translate.AnthropicStatus(status)
	c.Data(st, "application/json", translate.AnthropicErrorJSON(typ, msg))
	c.Abort()
}

// applyLimitHeaders writes the x-ratelimit-* headers every /v1 answer carries and, on the
// Messages routes, the same figures under Anthropic's names.
func applyLimitHeaders(c *gin.Context, ri *requestInfo, h ratelimit.Headers) {
	h.Apply(c.Header)
	if !speaksAnthropic(c) {
		return
	}
	// The reset is an instant the client reads against its own clock, so it is the real
	// time plus the wait the limiter worked out on its clock (docs/architecture.md, "Time").
	anthropicLimitHeaders(h, time.Now(), c.Header)
}

// anthropicLimitHeaders writes the anthropic-ratelimit-* trios; Anthropic states the reset
// as an RFC 3339 time rather than a duration.
func anthropicLimitHeaders(h ratelimit.Headers, now time.Time, set func(name, value string)) {
	reset := func(d time.Duration) string {
		t := now.Add(max(d, 0)).UTC()
		if t.Nanosecond() != 0 {
			t = t.Truncate(time.Second).Add(time.Second) // never earlier than the real reset
		}
		return t.Format(time.RFC3339)
	}
	h.ApplyAs(ratelimit.HeaderNames{
		LimitRequests: "anthropic-ratelimit-requests-limit", RemainingRequests: "anthropic-ratelimit-requests-remaining", ResetRequests: "anthropic-ratelimit-requests-reset",
		LimitTokens: "anthropic-ratelimit-tokens-limit", RemainingTokens: "anthropic-ratelimit-tokens-remaining", ResetTokens: "anthropic-ratelimit-tokens-reset",
	}, reset, set)
}

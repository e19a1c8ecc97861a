package apierr

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/ratelimit"
	"modelgate/redisconn"
)

// What a caller the limits or the spend budgets refused is told: the reason in words, the
// kind of scope that ran out (never its name), and when to retry.

// Refuse answers a refusal, with Retry-After in whole seconds (rounded up) when retry is
// positive.
func Refuse(c *gin.Context, status int, typ, code, msg string, retry time.Duration) {
	if retry > 0 {
		c.Header("Retry-After", strconv.FormatInt(int64(math.Ceil(retry.Seconds())), 10))
	}
	Abort(c, status, typ, code, "", msg)
}

// LimitRefused answers a request the limiter refused: 503 when its store failed
// (on_store_error: deny), 429 otherwise; both with Retry-After.
func LimitRefused(c *gin.Context, d ratelimit.Decision, err error) {
	Record(c).Refusal = string(d.Reason)
	if d.Reason == ratelimit.ReasonStoreUnavailable || (err != nil && d.Reason == ratelimit.ReasonNone) {
		// A second: when the store's breaker sends its next probe (redisconn.ProbeAfter),
		// so a client that waits that long finds out whether the store is back.
		Refuse(c, http.StatusServiceUnavailable, TypeServer, "limiter_unavailable",
			"modelgate cannot reach its limit store; try again shortly", redisconn.ProbeAfter)
		return
	}
	retry := d.RetryAfter
	if d.Reason == ratelimit.ReasonDailyTokens {
		c.Header("X-Should-Retry", "false")
		Refuse(c, http.StatusTooManyRequests, TypeQuota, "insufficient_quota",
			fmt.Sprintf("You exceeded your daily token budget (%s). It resets at 00:00 UTC.", scopeKind(d.Scope)), retry)
		return
	}
	Refuse(c, http.StatusTooManyRequests, rateLimitType(d.Reason), "rate_limit_exceeded",
		fmt.Sprintf("Rate limit reached for %s (%s). Please try again in %s.", reasonText(d.Reason), scopeKind(d.Scope), humanDuration(retry)), retry)
}

// SpendRefused answers a call a spend budget refused, like a spent daily token budget: 429
// insufficient_quota, x-should-retry: false, to retry when the budget resets (now is the
// server's clock).
func SpendRefused(c *gin.Context, refused *billing.Refusal, now time.Time) {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	msg := "You exceeded your daily spend budget (%s). It resets at 00:00 UTC."
	rec := Record(c)
	rec.Refusal = "daily_spend"
	if refused.Period == "month" {
		next = time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		msg = "You exceeded your monthly spend budget (%s). It resets on the first of the month at 00:00 UTC."
		rec.Refusal = "monthly_spend"
	}
	if refused.TooLarge {
		// Not spent, but this call could cost more than is left: a smaller output cap may fit.
		msg = "This call could cost more than what is left of your daily spend budget (%s); lower max_tokens, or wait until it resets at 00:00 UTC."
		if refused.Period == "month" {
			msg = "This call could cost more than what is left of your monthly spend budget (%s); lower max_tokens, or wait until it resets on the first of the month at 00:00 UTC."
		}
	}
	PeekLimits(c)
	c.Header("X-Should-Retry", "false")
	Refuse(c, http.StatusTooManyRequests, TypeQuota, "insufficient_quota", fmt.Sprintf(msg, scopeKind(refused.Scope)), next.Sub(now))
}

func rateLimitType(r ratelimit.Reason) string {
	if r == ratelimit.ReasonTokens {
		return "tokens"
	}
	return "requests"
}

func reasonText(r ratelimit.Reason) string {
	switch r {
	case ratelimit.ReasonTokens:
		return "tokens per minute"
	case ratelimit.ReasonConcurrency:
		return "concurrent requests"
	}
	return "requests per minute"
}

// scopeKind says whether the key or the team ran out, without naming either: the caller
// knows its own key, and team names are the operator's business.
func scopeKind(scope string) string {
	switch {
	case strings.HasPrefix(scope, "team:"):
		return "team limit"
	case strings.HasPrefix(scope, "enduser:"):
		return "end-user limit"
	case scope == auth.PassthroughAllScopeID:
		return "limit shared by all callers"
	}
	return "key limit"
}

func humanDuration(d time.Duration) string {
	if d < time.Second {
		return "1s"
	}
	return d.Round(time.Second).String()
}

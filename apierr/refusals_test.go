package apierr

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/ratelimit"
)

// refusedWith runs answer on a fresh request and returns what the client and the record got.
func refusedWith(answer func(c *gin.Context)) (*httptest.ResponseRecorder, *fakeRequest) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r := &fakeRequest{}
	c.Set(RequestKey, r)
	answer(c)
	return w, r
}

func TestLimitRefused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		d          ratelimit.Decision
		err        error
		status     int
		code, msg  string
		retryAfter string
		noRetry    bool
	}{
		{"store_down", ratelimit.Decision{Reason: ratelimit.ReasonStoreUnavailable}, nil, 503, "limiter_unavailable",
			"modelgate cannot reach its limit store; try again shortly", "1", false},
		{"store_error", ratelimit.Decision{}, errors.New("down"), 503, "limiter_unavailable",
			"modelgate cannot reach its limit store; try again shortly", "1", false},
		{"team_tokens_per_minute", ratelimit.Decision{Reason: ratelimit.ReasonTokens, Scope: "team:search", RetryAfter: 1500 * time.Millisecond}, nil, 429, "rate_limit_exceeded",
			"Rate limit reached for tokens per minute (team limit). Please try again in 2s.", "2", false},
		{"key_requests", ratelimit.Decision{Reason: ratelimit.ReasonRequests, Scope: "key:search/app", RetryAfter: 200 * time.Millisecond}, nil, 429, "rate_limit_exceeded",
			"Rate limit reached for requests per minute (key limit). Please try again in 1s.", "1", false},
		{"shared_concurrency", ratelimit.Decision{Reason: ratelimit.ReasonConcurrency, Scope: auth.PassthroughAllScopeID}, nil, 429, "rate_limit_exceeded",
			"Rate limit reached for concurrent requests (limit shared by all callers). Please try again in 1s.", "", false},
		{"end_user_daily_tokens", ratelimit.Decision{Reason: ratelimit.ReasonDailyTokens, Scope: "enduser:search/u1", RetryAfter: time.Hour}, nil, 429, "insufficient_quota",
			"You exceeded your daily token budget (end-user limit). It resets at 00:00 UTC.", "3600", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r := refusedWith(func(c *gin.Context) { LimitRefused(c, tc.d, tc.err) })
			msg := gjson.Get(w.Body.String(), "error.message").Str
			if w.Code != tc.status || r.rec.ErrCode != tc.code || msg != tc.msg || r.rec.Refusal != string(tc.d.Reason) {
				t.Fatalf("%d %q %q (refusal %q)", w.Code, r.rec.ErrCode, msg, r.rec.Refusal)
			}
			if w.Header().Get("Retry-After") != tc.retryAfter || (w.Header().Get("X-Should-Retry") == "false") != tc.noRetry {
				t.Errorf("headers %v", w.Header())
			}
		})
	}
}

func TestSpendRefused(t *testing.T) {
	now := time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		refused billing.Refusal
		refusal string
		msg     string
		retry   string
	}{
		{"daily", billing.Refusal{Scope: "key:search/app", Period: "day"}, "daily_spend",
			"You exceeded your daily spend budget (key limit). It resets at 00:00 UTC.", "3600"},
		{"monthly", billing.Refusal{Scope: "team:search", Period: "month"}, "monthly_spend",
			"You exceeded your monthly spend budget (team limit). It resets on the first of the month at 00:00 UTC.", "3600"},
		{"too_large", billing.Refusal{Scope: "team:search", Period: "day", TooLarge: true}, "daily_spend",
			"This call could cost more than what is left of your daily spend budget (team limit); lower max_tokens, or wait until it resets at 00:00 UTC.", "3600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r := refusedWith(func(c *gin.Context) { SpendRefused(c, &tc.refused, now) })
			if w.Code != 429 || r.rec.Refusal != tc.refusal || gjson.Get(w.Body.String(), "error.message").Str != tc.msg || r.peeked == 0 {
				t.Fatalf("%d %s (refusal %q, peeked %d)", w.Code, w.Body, r.rec.Refusal, r.peeked)
			}
			if w.Header().Get("Retry-After") != tc.retry || w.Header().Get("X-Should-Retry") != "false" {
				t.Errorf("headers %v", w.Header())
			}
		})
	}
}

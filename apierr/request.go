package apierr

import (
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// RequestKey is the gin context key under which the HTTP layer keeps a request's record
// (proxy's requestInfo). apierr reads it through Request only, so the route packages
// can refuse a call without importing proxy.
const RequestKey = "modelgate.info"

// Request is what an error answer tells the request it belongs to.
type Request interface {
	// LogRecord is the request's record, where an answer notes what the access log and
	// the metrics tell apart: its code, its upstream error, a refusal, a client gone.
	LogRecord() *reqlog.Record
	// PeekLimits puts the caller's x-ratelimit-* headers on an answer that did not go
	// through admission, once; nothing is charged.
	PeekLimits(c *gin.Context)
}

// request is c's Request, nil for a handler reached without the middleware.
func request(c *gin.Context) Request {
	v, _ := c.Get(RequestKey)
	r, _ := v.(Request)
	return r
}

// Record is the request's record, where an answer notes what the access log and the
// metrics tell apart (its route, code, upstream error, a refusal). A handler reached
// without the middleware (tests) notes on a record of its own, which nothing reads.
func Record(c *gin.Context) *reqlog.Record {
	if r := request(c); r != nil {
		return r.LogRecord()
	}
	return new(reqlog.Record)
}

func refused(c *gin.Context, code string) { Record(c).ErrCode = code }

// PeekLimits puts the caller's x-ratelimit-* headers on an answer that did not go through
// admission (model lists, requests refused before admission), so every /v1 answer to a
// known caller carries them.
func PeekLimits(c *gin.Context) {
	if r := request(c); r != nil {
		r.PeekLimits(c)
	}
}

// LimitHeaders writes the x-ratelimit-* headers every /v1 answer carries and, on the
// Messages routes, the same figures under Anthropic's names.
func LimitHeaders(c *gin.Context, h ratelimit.Headers) {
	h.Apply(c.Header)
	if !SpeaksAnthropic(c) {
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

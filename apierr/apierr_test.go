package apierr

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/translate"
)

// TestMain puts gin in release mode once, as main does, so the engines the tests build do
// not print their routes.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// fakeRequest is the HTTP layer's record as apierr sees it.
type fakeRequest struct {
	rec    reqlog.Record
	peeked int
}

func (r *fakeRequest) LogRecord() *reqlog.Record { return &r.rec }
func (r *fakeRequest) PeekLimits(*gin.Context)   { r.peeked++ }

// postContext is a POST to /v1/x as a handler sees it, with the HTTP layer's record set.
func postContext() (*gin.Context, *httptest.ResponseRecorder, *fakeRequest) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/x", nil)
	r := &fakeRequest{}
	c.Set(RequestKey, r)
	return c, w, r
}

// Abort writes one refusal in each route's shape, records the code the access log reads,
// and (outside the envelope) puts the caller's limit headers on the answer.
func TestAbortWritesTheRoutesShape(t *testing.T) {
	for _, tc := range []struct {
		name       string
		shape      Shape
		mark       bool
		wantStatus int
		wantCode   string
		wantPeek   int
		check      func(b []byte) bool
	}{
		{"openai_default", OpenAI, false, 429, "rate_limited", 1, func(b []byte) bool {
			e := gjson.GetBytes(b, "error")
			return e.Get("type").Str == TypeQuota && e.Get("code").Str == "rate_limited" && e.Get("param").Type == gjson.Null
		}},
		{"anthropic", Anthropic, true, 429, "rate_limited", 1, func(b []byte) bool {
			return gjson.GetBytes(b, "type").Str == "error" && gjson.GetBytes(b, "error.type").Str == "rate_limit_error"
		}},
		{"envelope", Envelope, true, 429, "rate_limited", 0, func(b []byte) bool {
			return gjson.GetBytes(b, "code").Int() != 0 && gjson.GetBytes(b, "msg").Str == "slow down"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w, r := postContext()
			if tc.mark {
				Mark(c, tc.shape)
			}
			if Of(c) != tc.shape {
				t.Fatalf("shape %d, want %d", Of(c), tc.shape)
			}
			Abort(c, http.StatusTooManyRequests, TypeQuota, "rate_limited", "", "slow down")
			if w.Code != tc.wantStatus || !c.IsAborted() || !tc.check(w.Body.Bytes()) {
				t.Fatalf("status %d aborted %v body %s", w.Code, c.IsAborted(), w.Body)
			}
			if r.rec.ErrCode != tc.wantCode || r.peeked != tc.wantPeek {
				t.Errorf("recorded code %q, peeked %d times; want %q, %d", r.rec.ErrCode, r.peeked, tc.wantCode, tc.wantPeek)
			}
		})
	}
}

// A handler reached without the HTTP layer's record still answers.
func TestAbortWithoutARequest(t *testing.T) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodGet, "/v1/nowhere%01", nil)
	NotFound(c)
	if w.Code != http.StatusNotFound || gjson.GetBytes(w.Body.Bytes(), "error.code").Str != "unknown_url" {
		t.Fatalf("status %d body %s", w.Code, w.Body)
	}
	if msg := gjson.GetBytes(w.Body.Bytes(), "error.message").Str; msg != "Unknown request URL: GET /v1/nowhere?." {
		t.Errorf("message %q", msg)
	}
}

func TestUnauthorizedMessageSpeaksTheRoutesWords(t *testing.T) {
	for _, tc := range []struct {
		shape   Shape
		missing bool
		want    string
	}{
		{OpenAI, true, "You didn't provide an API key. Send it in the Authorization header as 'Bearer <key>'."},
		{OpenAI, false, "Incorrect API key provided."},
		{Anthropic, true, "x-api-key header is required (or Authorization: Bearer <key>)"},
		{Anthropic, false, "invalid x-api-key"},
		{Envelope, false, "invalid API key"},
	} {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		Mark(c, tc.shape)
		if got := UnauthorizedMessage(c, tc.missing); got != tc.want {
			t.Errorf("shape %d missing %v: %q, want %q", tc.shape, tc.missing, got, tc.want)
		}
	}
}

func TestAnthropicLimitHeadersResetIsNeverEarly(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	got := map[string]string{}
	anthropicLimitHeaders(ratelimit.Headers{HasRequests: true, LimitRequests: 10, RemainingRequests: 9, ResetRequests: 1500 * time.Millisecond},
		now, func(k, v string) { got[k] = v })
	if got["anthropic-ratelimit-requests-reset"] != "2026-01-02T03:04:07Z" || got["anthropic-ratelimit-requests-limit"] != "10" {
		t.Errorf("headers %v", got)
	}
	if _, ok := got["anthropic-ratelimit-tokens-limit"]; ok {
		t.Error("an unlimited trio was written")
	}
}

// A request translate refused is answered with what its error says, and the defaults where
// it says nothing; an error that is not translate's is a plain 400.
func TestUntranslatable(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		err                       error
		status                    int
		typ, code, param, message string
	}{
		{"full", &translate.Error{Status: 422, Type: "x_error", Code: "bad_tool", Param: "tools[0]", Message: "no"},
			422, "x_error", "bad_tool", "tools[0]", "no"},
		{"defaults", &translate.Error{Code: "bad_role", Message: "role"}, 400, TypeInvalidRequest, "bad_role", "", "role"},
		{"wrapped", fmt.Errorf("parse: %w", &translate.Error{Code: "deep", Message: "m"}), 400, TypeInvalidRequest, "deep", "", "m"},
		{"other", errors.New("boom"), 400, TypeInvalidRequest, "invalid_request", "", "The request could not be translated."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w, r := postContext()
			Untranslatable(c, tc.err)
			e := gjson.GetBytes(w.Body.Bytes(), "error")
			if w.Code != tc.status || !c.IsAborted() || e.Get("type").Str != tc.typ || e.Get("code").Str != tc.code ||
				e.Get("param").Str != tc.param || e.Get("message").Str != tc.message {
				t.Fatalf("status %d aborted %v body %s", w.Code, c.IsAborted(), w.Body)
			}
			if r.rec.ErrCode != tc.code {
				t.Errorf("recorded code %q, want %q", r.rec.ErrCode, tc.code)
			}
		})
	}
}

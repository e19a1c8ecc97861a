package proxy

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/ratelimit"
)

const (
	principalKey = "modelgate.principal"
	stateKey     = "modelgate.state"
)

// authenticate resolves the bearer token to a principal. Failures answer 401 before anything
// else happens: no body is read and nothing goes upstream.
func (s *Server) authenticate(c *gin.Context) {
	st := s.state()
	ri := info(c)
	p, err := st.auth.Authenticate(authorization(c, ri.anthropic))
	if err != nil {
		msg := "Incorrect API key provided."
		if errors.Is(err, auth.ErrMissing) {
			msg = "You didn't provide an API key. Send it in the Authorization header as 'Bearer <key>'."
		}
		if ri.anthropic {
			msg = anthropicAuthMessage(err)
		}
		abortOpenAI(c, http.StatusUnauthorized, typeInvalidRequest, "invalid_api_key", "", msg)
		return
	}
	if st.auth.Mode() == auth.ModePassthrough {
		s.limitPassthrough(p, st.cfg.Ratelimit)
	}
	ri.team, ri.keyName, ri.principal = p.Team, p.KeyName, p
	c.Set(principalKey, p)
	c.Set(stateKey, st)
}

// limitRequest is the limiter's view of one request by p that reserves reserve.
func limitRequest(p *auth.Principal, reserve ratelimit.Usage) ratelimit.Request {
	req := ratelimit.Request{
		Key:    ratelimit.Scope{ID: p.ScopeID, Limits: p.KeyLimits},
		Shadow: p.Shadow,
		Tokens: reserve.InputTokens + reserve.OutputTokens,
		Input:  reserve.InputTokens,
	}
	if p.TeamScopeID != "" {
		req.Team = &ratelimit.Scope{ID: p.TeamScopeID, Limits: p.TeamLimits}
	}
	return req
}

// peekLimitHeaders puts the caller's x-ratelimit-* headers on an answer that did not go
// through admission (model lists, requests refused before admission), so every /v1 answer to
// a known caller carries them. Nothing is charged.
func peekLimitHeaders(c *gin.Context) {
	ri := info(c)
	if ri.principal == nil || ri.limitHeadersOK || ri.srv == nil {
		return
	}
	ri.limitHeadersOK = true
	h, err := ri.srv.limiter.Peek(c.Request.Context(), limitRequest(ri.principal, ratelimit.Usage{}))
	if err == nil {
		applyLimitHeaders(c, ri, h)
	}
}

func principal(c *gin.Context) *auth.Principal {
	return c.MustGet(principalKey).(*auth.Principal)
}

func requestState(c *gin.Context) *state {
	return c.MustGet(stateKey).(*state)
}

// admit asks the limiter for room for one request that may use up to reserve (its input
// estimate and output cap). It sets
// the x-ratelimit-* headers either way. On refusal it has answered the client and returns nil.
func (s *Server) admit(c *gin.Context, p *auth.Principal, reserve ratelimit.Usage, openAIShape bool) *ratelimit.Ticket {
	ticket, d, err := s.limiter.Admit(c.Request.Context(), limitRequest(p, reserve))
	ri := info(c)
	applyLimitHeaders(c, ri, d.Headers)
	ri.limitHeadersOK = true
	if d.WouldRefuse != "" {
		ri.refusal = "shadow_" + string(d.WouldRefuse)
	}
	if d.StoreError && d.Allowed {
		// The shared store failed and the config says to let traffic through; the limiter
		// has logged it.
		ri.refusal = "store_unavailable_allowed"
	}
	if ri.trace != nil {
		ri.trace.limitDecision = "refused"
		if d.Allowed {
			ri.trace.limitDecision = "allowed"
		}
	}
	if d.Allowed {
		ri.admitted = true
		return ticket
	}
	ri.refusal = string(d.Reason)
	if d.Reason == ratelimit.ReasonStoreUnavailable || (err != nil && d.Reason == ratelimit.ReasonNone) {
		s.refuse(c, http.StatusServiceUnavailable, typeServer, "limiter_unavailable",
			"modelgate cannot reach its limit store; try again shortly", 0, openAIShape)
		return nil
	}
	retry := d.RetryAfter
	if d.Reason == ratelimit.ReasonDailyTokens {
		c.Header("X-Should-Retry", "false")
		s.refuse(c, http.StatusTooManyRequests, typeQuota, "insufficient_quota",
			fmt.Sprintf("You exceeded your daily token budget (%s). It resets at 00:00 UTC.", scopeKind(d.Scope)), retry, openAIShape)
		return nil
	}
	s.refuse(c, http.StatusTooManyRequests, rateLimitType(d.Reason), "rate_limit_exceeded",
		fmt.Sprintf("Rate limit reached for %s (%s). Please try again in %s.", reasonText(d.Reason), scopeKind(d.Scope), humanDuration(retry)), retry, openAIShape)
	return nil
}

func (s *Server) refuse(c *gin.Context, status int, typ, code, msg string, retry time.Duration, openAIShape bool) {
	if retry > 0 {
		c.Header("Retry-After", strconv.FormatInt(int64(math.Ceil(retry.Seconds())), 10))
	}
	if openAIShape {
		abortOpenAI(c, status, typ, code, "", msg)
		return
	}
	abortEnvelope(c, status, -1, msg)
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
	case scope == passthroughAllScopeID:
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

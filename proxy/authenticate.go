package proxy

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/alerts"
	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/reqbody"
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
	p, err := st.auth.Authenticate(authorization(c))
	if err != nil {
		abortError(c, http.StatusUnauthorized, typeInvalidRequest, "invalid_api_key", "", apierr.UnauthorizedMessage(c, errors.Is(err, auth.ErrMissing)))
		return
	}
	if st.auth.Mode() == auth.ModePassthrough {
		s.callers.Limit(p, st.cfg.Ratelimit, s.now())
	}
	ri.Team, ri.Key, ri.principal, ri.prices = p.Team, p.KeyName, p, st.prices
	ri.RuntimeTeam = p.Runtime
	c.Set(principalKey, p)
	c.Set(stateKey, st)
}

// peekLimitHeaders puts the caller's x-ratelimit-* headers on an answer that did not go
// through admission (model lists, requests refused before admission), so every /v1 answer to
// a known caller carries them. Nothing is charged.
func peekLimitHeaders(c *gin.Context) { info(c).PeekLimits(c) }

// PeekLimits is peekLimitHeaders for apierr, which refuses calls on the route packages' behalf.
func (ri *requestInfo) PeekLimits(c *gin.Context) {
	if ri.principal == nil || ri.limitHeadersOK || ri.limits == nil {
		return
	}
	ri.limitHeadersOK = true
	h, err := ri.limits.Peek(c.Request.Context(), accounting.LimitRequest(ri.principal, ratelimit.Usage{}))
	if err == nil {
		apierr.LimitHeaders(c, h)
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
func (s *Server) admit(c *gin.Context, p *auth.Principal, reserve ratelimit.Usage) *ratelimit.Ticket {
	ticket, d, err := s.limiter.Admit(c.Request.Context(), accounting.LimitRequest(p, reserve))
	return s.admitted(c, ticket, d, err)
}

// admitted is admit once the limiter has decided: the headers, the request's record, and
// the refusal's answer.
func (s *Server) admitted(c *gin.Context, ticket *ratelimit.Ticket, d ratelimit.Decision, err error) *ratelimit.Ticket {
	ri := info(c)
	apierr.LimitHeaders(c, d.Headers)
	ri.limitHeadersOK = true
	if note := accounting.AdmissionNote(d); note != "" {
		ri.Refusal = note // a store failure let through has been logged by the limiter
	}
	if ri.trace != nil {
		ri.trace.Limited(d.Allowed)
	}
	if d.Allowed {
		ri.Admitted = true
		return ticket
	}
	s.refuseDecision(c, d, err)
	return nil
}

// refuseDecision answers a request the limiter refused (apierr.LimitRefused); a spent daily
// token budget is told to the alerts too.
func (s *Server) refuseDecision(c *gin.Context, d ratelimit.Decision, err error) {
	if d.Reason == ratelimit.ReasonDailyTokens {
		s.noteExhausted(d.Scope, alerts.BudgetTokensDay)
	}
	apierr.LimitRefused(c, d, err)
}

// admitEarly refuses, before its body is read, a model call whose key or team the limiter
// would refuse whatever the body says (accounting.EarlyRequest); the full admission after
// parsing still decides. It runs as a handler of its own before the route's, so it adds no
// frame under a stream.
func (s *Server) admitEarly(route string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if p := info(c).principal; p != nil {
			s.check(c, route, accounting.EarlyRequest(p))
		}
	}
}

// checkLookup refuses a call that reads kept records or estimates tokens (the
// stored-response routes, count_tokens) when its key or team is out of requests
// (accounting.LookupRequest). It is not counted, as a model list is not.
func (s *Server) checkLookup(route string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if p := info(c).principal; p != nil {
			s.check(c, route, accounting.LookupRequest(p))
		}
	}
}

// check answers the client with the limiter's refusal when req would be refused now.
func (s *Server) check(c *gin.Context, route string, req ratelimit.Request) {
	ri := info(c)
	d, err := s.limiter.Check(c.Request.Context(), req)
	if err == nil {
		// The same headers a Peek would give: a later refusal of the body needs none.
		apierr.LimitHeaders(c, d.Headers)
		ri.limitHeadersOK = true
	}
	if d.Allowed {
		return
	}
	ri.Route = route
	reqbody.Abandon(c.Writer, c.Request) // the answer does not wait for a body that may never come
	s.refuseDecision(c, d, err)
}

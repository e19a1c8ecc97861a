package accounting

import (
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/ratelimit"
)

// The scopes a principal's call is limited and charged under: its key's, its team's, and
// (issue 28) an end user's of its team when the team limits them and the request names one.
// The limiter and the spend ledger are asked with the same scope ids.

// LimitRequest is the limiter's view of one request by p that reserves reserve.
func LimitRequest(p *auth.Principal, reserve ratelimit.Usage) ratelimit.Request {
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

// WithEndUser adds the end user's scope to req when the team limits its end users' requests
// or daily tokens and the request names one; a request naming none is not limited by them.
// Its spend_per_day is the ledger's (SpendBudgets).
func WithEndUser(req ratelimit.Request, p *auth.Principal, endUser string) ratelimit.Request {
	l := p.EndUserLimits
	if endUser == "" || p.Team == "" || (l.RequestsPerMinute <= 0 && l.TokensPerDay <= 0) {
		return req
	}
	req.EndUser = &ratelimit.Scope{ID: EndUserScopeID(p, endUser),
		Limits: config.Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerDay: l.TokensPerDay}}
	return req
}

// WithoutConcurrency is req with no concurrency limit at either scope: for a request that
// holds no slot for any time (a lookup, a WebSocket message that asks the model nothing), so
// a key whose slots are all held by its running calls is not refused it.
func WithoutConcurrency(req ratelimit.Request) ratelimit.Request {
	req.Key.Limits.ConcurrentRequests = 0
	if req.Team != nil {
		team := *req.Team
		team.Limits.ConcurrentRequests = 0
		req.Team = &team
	}
	return req
}

// EndUserScopeID names an end user of the principal's team in the limiter and the ledger:
// "enduser:<team>/<label>", the label already bounded and free of '/' (reqlog.Attribution).
func EndUserScopeID(p *auth.Principal, endUser string) string {
	return "enduser:" + p.Team + "/" + endUser
}

// SpendBudgets are the key's and the team's spend budgets, in micro-units, and the end
// user's daily one when the team sets end_user_limits.spend_per_day and the request names an
// end user; n says how many of the three are set.
func SpendBudgets(p *auth.Principal, endUser string) (b [3]billing.Budget, n int) {
	b[0] = billing.Budget{Scope: p.ScopeID, PerDay: billing.MicrosOf(p.KeyLimits.SpendPerDay), PerMonth: billing.MicrosOf(p.KeyLimits.SpendPerMonth)}
	b[1] = billing.Budget{Scope: p.TeamScopeID, PerDay: billing.MicrosOf(p.TeamLimits.SpendPerDay), PerMonth: billing.MicrosOf(p.TeamLimits.SpendPerMonth)}
	if endUser == "" || p.EndUserLimits.SpendPerDay <= 0 || p.Team == "" {
		return b, 2
	}
	b[2] = billing.Budget{Scope: EndUserScopeID(p, endUser), PerDay: billing.MicrosOf(p.EndUserLimits.SpendPerDay), DayOnly: true}
	return b, 3
}

// SpendOf is hold with the scopes of p a call is charged to, held or not: the key's, the
// team's, and the end user's daily one when the team limits it (the scopes a hold is taken
// against). p nil (a caller never authenticated) is charged to none.
func SpendOf(hold *billing.Hold, p *auth.Principal, endUser string) Spend {
	spend := Spend{Hold: hold}
	if p == nil {
		return spend
	}
	budgets, n := SpendBudgets(p, endUser)
	spend.KeyScope, spend.TeamScope = budgets[0].Scope, budgets[1].Scope
	if n == 3 {
		spend.EndUserScope = budgets[2].Scope
	}
	return spend
}

package accounting

import (
	"testing"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/ratelimit"
)

// The limiter and the ledger are asked under the same scope ids: the key's, the team's, and
// an end user's of the team only when the team limits end users and the request names one.
func TestScopes(t *testing.T) {
	team := &auth.Principal{Team: "search", ScopeID: "key:search/app", TeamScopeID: "team:search",
		KeyLimits: config.Limits{ConcurrentRequests: 2}, TeamLimits: config.Limits{ConcurrentRequests: 5, SpendPerDay: 1},
		EndUserLimits: config.EndUserLimits{RequestsPerMinute: 3, SpendPerDay: 0.5}}
	noTeam := &auth.Principal{ScopeID: "caller:x"}
	for _, tc := range []struct {
		name              string
		p                 *auth.Principal
		endUser           string
		wantTeam, wantEnd string
		wantBudgets       int
	}{
		{"team_and_end_user", team, "u1", "team:search", "enduser:search/u1", 3},
		{"team_no_end_user", team, "", "team:search", "", 2},
		{"no_team", noTeam, "u1", "", "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := WithEndUser(LimitRequest(tc.p, ratelimit.Usage{InputTokens: 10, OutputTokens: 5}), tc.p, tc.endUser)
			if req.Key.ID != tc.p.ScopeID || req.Tokens != 15 || req.Input != 10 {
				t.Fatalf("request %+v", req)
			}
			if got := scopeID(req.Team); got != tc.wantTeam {
				t.Errorf("team scope %q, want %q", got, tc.wantTeam)
			}
			if got := scopeID(req.EndUser); got != tc.wantEnd {
				t.Errorf("end-user scope %q, want %q", got, tc.wantEnd)
			}
			b, n := SpendBudgets(tc.p, tc.endUser)
			spend := SpendOf(nil, tc.p, tc.endUser)
			if n != tc.wantBudgets || spend.KeyScope != b[0].Scope || spend.TeamScope != b[1].Scope || (n == 3) != (spend.EndUserScope != "") {
				t.Errorf("budgets %+v (%d), spend %+v", b, n, spend)
			}
			if n == 3 && (b[2].Scope != tc.wantEnd || !b[2].DayOnly) {
				t.Errorf("end user's budget %+v", b[2])
			}
			free := WithoutConcurrency(req)
			if free.Key.Limits.ConcurrentRequests != 0 || (free.Team != nil && free.Team.Limits.ConcurrentRequests != 0) {
				t.Errorf("concurrency kept: %+v", free)
			}
			if req.Team != nil && req.Team.Limits.ConcurrentRequests != 5 {
				t.Error("WithoutConcurrency changed the request it was given")
			}
		})
	}
	if s := SpendOf(nil, nil, "u1"); s != (Spend{}) {
		t.Errorf("an unauthenticated caller is charged to %+v", s)
	}
}

func scopeID(s *ratelimit.Scope) string {
	if s == nil {
		return ""
	}
	return s.ID
}

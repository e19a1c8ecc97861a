package accounting

import (
	"testing"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/ratelimit"
)

// A lookup holds no slot at either scope and reserves nothing; an early check reserves one
// output token and keeps the concurrency limits.
func TestEarlyAndLookupRequests(t *testing.T) {
	p := &auth.Principal{Team: "alpha", ScopeID: "key:alpha/k", TeamScopeID: "team:alpha",
		KeyLimits: config.Limits{ConcurrentRequests: 2}, TeamLimits: config.Limits{ConcurrentRequests: 5}}
	early := EarlyRequest(p)
	if early.Tokens != 1 || early.Key.Limits.ConcurrentRequests != 2 || early.Team.Limits.ConcurrentRequests != 5 {
		t.Errorf("early: %+v, team %+v", early, early.Team)
	}
	lookup := LookupRequest(p)
	if lookup.Tokens != 0 || lookup.Key.Limits.ConcurrentRequests != 0 || lookup.Team.Limits.ConcurrentRequests != 0 {
		t.Errorf("lookup: %+v, team %+v", lookup, lookup.Team)
	}
	if p.TeamLimits.ConcurrentRequests != 5 || p.KeyLimits.ConcurrentRequests != 2 {
		t.Errorf("the principal's limits changed: %+v %+v", p.KeyLimits, p.TeamLimits)
	}
}

func TestAdmissionNote(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    ratelimit.Decision
		want string
	}{
		{"plain", ratelimit.Decision{Allowed: true}, ""},
		{"shadow", ratelimit.Decision{Allowed: true, WouldRefuse: ratelimit.ReasonDailyTokens}, "shadow_" + string(ratelimit.ReasonDailyTokens)},
		{"store failed, let through", ratelimit.Decision{Allowed: true, StoreError: true}, "store_unavailable_allowed"},
		{"store failed wins over shadow", ratelimit.Decision{Allowed: true, StoreError: true, WouldRefuse: ratelimit.ReasonDailyTokens}, "store_unavailable_allowed"},
		{"store failed, refused", ratelimit.Decision{StoreError: true}, ""},
	} {
		if got := AdmissionNote(tc.d); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

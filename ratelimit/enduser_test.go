package ratelimit

import (
	"testing"
	"time"

	"modelgate/config"
)

// TestEndUserScope: an end user's scope limits that user alone, all or nothing with the key
// and the team, on either store: its refusal names it, takes nothing from the key or the
// team, and another end user of the same key is not held back.
func TestEndUserScope(t *testing.T) {
	endUser := func(id string, lim config.Limits) *Scope { return &Scope{ID: "enduser:t/" + id, Limits: lim} }
	cases := []struct {
		name   string
		limits config.Limits
		tokens int64
		admits int // admitted before the refusal
		reason Reason
	}{
		{"requests per minute", config.Limits{RequestsPerMinute: 2}, 10, 2, ReasonRequests},
		{"tokens per day", config.Limits{TokensPerDay: 100}, 40, 2, ReasonDailyTokens},
	}
	for _, kind := range allKinds() {
		for _, tc := range cases {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				c := newClock(start.Add(time.Hour))
				l := kind.make(t, c)
				key, team := keyScope("k", config.Limits{RequestsPerMinute: 100}), teamScope("t", config.Limits{RequestsPerMinute: 100})
				req := func(user string) Request {
					return Request{Key: key, Team: team, EndUser: endUser(user, tc.limits), Tokens: tc.tokens}
				}
				for i := range tc.admits {
					tk, d := mustAdmit(t, l, req("alice"))
					if !d.Allowed {
						t.Fatalf("request %d refused: %+v", i, d)
					}
					tk.Settle(Usage{InputTokens: tc.tokens / 2, OutputTokens: tc.tokens - tc.tokens/2})
				}
				_, d := mustAdmit(t, l, req("alice"))
				if d.Allowed || d.Reason != tc.reason || d.Scope != "enduser:t/alice" {
					t.Fatalf("decision %+v, want a %s refusal by alice's scope", d, tc.reason)
				}
				if u := usageOf(t, l, key); u.DayRequests != int64(tc.admits) {
					t.Fatalf("the refusal counted on the key: %+v", u)
				}
				tk, d := mustAdmit(t, l, req("bob"))
				if !d.Allowed {
					t.Fatalf("another end user was held back: %+v", d)
				}
				tk.Release()
				if u := usageOf(t, l, *endUser("alice", tc.limits)); u.DayRequests != int64(tc.admits) {
					t.Fatalf("alice's scope: %+v", u)
				}
			})
		}
	}
}

// TestEndUserScopeSharedByReplicas: two limiters on one Redis share an end user's counters.
func TestEndUserScopeSharedByReplicas(t *testing.T) {
	url := redisURL(t)
	c := newClock(start.Add(time.Hour))
	a, b := newLimiter(t, Options{Store: url, Now: c.Now}), newLimiter(t, Options{Store: url, Now: c.Now})
	user := &Scope{ID: "enduser:t/carol", Limits: config.Limits{RequestsPerMinute: 3}}
	admitted := 0
	for i := range 6 {
		l := a
		if i%2 == 1 {
			l = b
		}
		tk, d := mustAdmit(t, l, Request{Key: keyScope("k", config.Limits{}), Team: teamScope("t", config.Limits{}), EndUser: user, Tokens: 1})
		if d.Allowed {
			admitted++
			tk.Release()
		}
	}
	if admitted != 3 {
		t.Fatalf("%d admitted across two replicas, want 3", admitted)
	}
	if tag := slotTag(user.ID); tag != "t" {
		t.Fatalf("an end user's keys hash by %q, not its team's", tag)
	}
}

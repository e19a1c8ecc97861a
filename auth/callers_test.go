package auth

import (
	"testing"
	"time"

	"modelgate/config"
)

func TestCallerScopesCapped(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cs := NewCallers()
	steps := []struct {
		caller string
		at     time.Duration
		want   string
	}{
		{"caller:a", 0, "caller:a"},
		{"caller:b", time.Minute, "caller:b"},
		{"caller:c", 2 * time.Minute, overflowScopeID}, // full: a and b are recent
		{"caller:a", 3 * time.Minute, "caller:a"},      // still its own
		{"caller:d", 4 * time.Minute, overflowScopeID},
		// b was last seen at 1m; a day and more later it gives way to a new caller.
		{"caller:a", 27 * time.Hour, "caller:a"},
		{"caller:e", 27*time.Hour + time.Minute, "caller:e"},
		{"caller:b", 27*time.Hour + 2*time.Minute, overflowScopeID},
	}
	for i, s := range steps {
		if got := cs.scope(s.caller, t0.Add(s.at), 2); got != s.want {
			t.Errorf("step %d: %s at %v got %s, want %s", i, s.caller, s.at, got, s.want)
		}
	}
}

// Limit gives a caller its capped scope, and the shared passthrough limits when set.
func TestCallersLimit(t *testing.T) {
	cs := NewCallers()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	shared := config.Limits{RequestsPerMinute: 2}
	for i, tc := range []struct {
		id        string
		rl        config.Ratelimit
		wantScope string
		wantTeam  string
	}{
		{"caller:a", config.Ratelimit{PassthroughCallers: 1}, "caller:a", ""},
		{"caller:b", config.Ratelimit{PassthroughCallers: 1}, overflowScopeID, ""},
		{"caller:c", config.Ratelimit{PassthroughLimits: shared}, "caller:c", PassthroughAllScopeID},
	} {
		p := &Principal{ScopeID: tc.id}
		cs.Limit(p, tc.rl, now)
		if p.ScopeID != tc.wantScope || p.TeamScopeID != tc.wantTeam || (tc.wantTeam != "" && p.TeamLimits != shared) {
			t.Errorf("step %d: scope %q team %q %+v", i, p.ScopeID, p.TeamScopeID, p.TeamLimits)
		}
	}
}

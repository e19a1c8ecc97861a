package proxy

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"modelgate/config"
)

func TestCallerScopesCapped(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cs := newCallerScopes()
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

// Issue 18: in passthrough mode a caller that changes its token gets no fresh budget past the
// cap, and the optional shared limits bound all callers together.
func TestPassthroughScopesCappedAndShared(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   []int // statuses for callers 1..4, one request each
	}{
		// Two callers have their own 1-request budget; the third and fourth share the
		// overflow scope's one request.
		{"cap", func(c *config.Config) {
			c.Limits.RequestsPerMinute = 1
			c.Ratelimit.PassthroughCallers = 2
		}, []int{200, 200, 200, 429}},
		// All callers together may make two requests a minute.
		{"shared", func(c *config.Config) {
			c.Ratelimit.PassthroughLimits.RequestsPerMinute = 2
		}, []int{200, 200, 429, 429}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var keys []string
			for i := range tc.want {
				keys = append(keys, fmt.Sprintf("sk-passthrough-caller-%d", i+1))
			}
			env := startEnv(t, envOptions{yaml: passthroughYAML, mutate: tc.mutate, simKeys: keys})
			for i, want := range tc.want {
				key := keys[i]
				status, _, body := env.do(t, http.MethodPost, "/v1/responses", key, []byte(respBody))
				if status != want {
					t.Errorf("caller %d: %d, want %d: %s", i+1, status, want, body)
				}
			}
		})
	}
}

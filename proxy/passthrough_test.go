package proxy

import (
	"fmt"
	"net/http"
	"testing"

	"modelgate/config"
)

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

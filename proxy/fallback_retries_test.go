package proxy

import (
	"slices"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/platformsim"
)

// A model refusing with 503 Retry-After: 1 moves to its fallback at once when it has no
// retries of its own (issue 45), though upstream.max_retries is 2: one call to big, then
// small, no wait, well under the second the retries would have waited. With models[].retries
// set, big is retried as before, each retry waiting the platform's Retry-After.
func TestFallbackBeforeRetries(t *testing.T) {
	busy := platformsim.Reply{Status: 503, Header: map[string]string{"Retry-After": "1"},
		Body: errorJSON("server_error", "server_is_overloaded", "busy")}
	cases := []struct {
		name    string
		retries *int
		calls   []string
		waits   int // waits of 1 s the retry policy chose
	}{
		{"fallback_at_once", nil, []string{"sim-big", "sim-small"}, 0},
		{"retries_2", new(int), []string{"sim-big", "sim-big", "sim-big", "sim-small"}, 2},
	}
	*cases[1].retries = 2
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := fallbackEnv(t, envOptions{mutate: func(cfg *config.Config) {
				n := 2
				cfg.Upstream.MaxRetries = &n
				cfg.Models[0].Retries = c.retries
			}})
			waits := &waitLog{}
			if c.waits > 0 {
				// The waits are recorded rather than slept: what matters is that they were chosen.
				st := *env.server.state()
				st.gateway = withSleep(st.gateway, waits.sleep)
				env.server.st.Store(&st)
			}
			env.sim.SetModelScript("sim-big", busy, busy, busy)
			start := time.Now()
			status, h, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(fallbackRoutes[2].body))
			took := time.Since(start)
			if status != 200 || h.Get(servedModelHeader) != "small" {
				t.Fatalf("%d served by %q: %s", status, h.Get(servedModelHeader), b)
			}
			if got := upstreamModels(env); !slices.Equal(got, c.calls) {
				t.Errorf("platform calls %v, want %v", got, c.calls)
			}
			got := waits.all()
			if len(got) != c.waits {
				t.Errorf("retry waits %v, want %d", got, c.waits)
			}
			for _, d := range got {
				if d != time.Second {
					t.Errorf("retry wait %v, want the platform's Retry-After (1s)", d)
				}
			}
			if c.waits == 0 && took >= time.Second {
				// Slept for real here: a retry would have cost at least its second.
				t.Errorf("fallback served after %v, want well under the 1 s Retry-After", took)
			}
			t.Logf("served in %v", took)
		})
	}
}

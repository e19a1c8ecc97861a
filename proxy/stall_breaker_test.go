package proxy

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"modelgate/breaker"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/testclock"
)

// TestStallsOpenModelBreaker: stalls (no output event within first_token_timeout) count
// against the stalling model's breaker like 5xx answers. After breaker.failures of them (5 by
// default, as docs/configuration.md says) calls to the model go to its fallback at once: the
// model is not called, so nothing waits for its first token. Its breaker then shows open.
func TestStallsOpenModelBreaker(t *testing.T) {
	const stallAfter = 600 * time.Millisecond
	for _, rt := range []fallbackRoute{fallbackRoutes[1], fallbackRoutes[3]} { // the streamed Responses and chat
		t.Run(rt.name, func(t *testing.T) {
			failures := *config.Default().Upstream.Breaker.Failures
			if failures != 5 {
				t.Fatalf("breaker.failures defaults to %d; docs/configuration.md says 5", failures)
			}
			clk := testclock.At(testclock.Origin())
			set := breaker.New(breaker.Options{Now: clk.Now,
				Settings: breaker.Settings{Failures: failures, Window: time.Minute, Cooldown: 30 * time.Second}})
			env := fallbackEnv(t, envOptions{breakers: set, mutate: func(c *config.Config) {
				for i := range c.Models {
					if c.Models[i].ID == "big" {
						c.Models[i].FirstTokenTimeout = stallAfter
					}
				}
			}})
			stall := platformsim.Reply{AfterEvents: 1, Silence: time.Hour}
			env.sim.SetModelScript("sim-big", slices.Repeat([]platformsim.Reply{stall}, failures+5)...)
			call := func(what string) time.Duration {
				t.Helper()
				start := time.Now()
				status, h, b := env.do(t, "POST", rt.path, keyAlpha1, []byte(rt.body))
				took := time.Since(start)
				if status != 200 || h.Get(servedModelHeader) != "small" || !bytes.Contains(b, []byte(streamEnd[rt.path])) {
					t.Fatalf("%s: %d served by %q: %s", what, status, h.Get(servedModelHeader), tail(b))
				}
				return took
			}
			for i := range failures {
				if took := call("stall"); took < stallAfter {
					t.Fatalf("stall %d served in %v, before first_token_timeout: it did not stall", i+1, took)
				}
			}
			if st := breakerState(t, env, "model:sim-big"); st != "open" {
				t.Fatalf("after %d stalls the breaker of sim-big is %q", failures, st)
			}
			for i := range 3 {
				// With the breaker open big is not called at all; the slack below the
				// timeout is all scheduling on a loaded machine.
				if took := call("with the breaker open"); took >= stallAfter {
					t.Fatalf("call %d after the breaker opened took %v: it waited for big", i+1, took)
				}
			}
			big := 0
			for _, m := range upstreamModels(env) {
				if m == "sim-big" {
					big++
				}
			}
			if big != failures {
				t.Fatalf("sim-big was called %d times, want only the %d stalls", big, failures)
			}
		})
	}
}

package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/ratelimit"
)

// n>1 streams run one reader per choice. A client that leaves mid-stream must end every
// upstream call and leave no reader goroutine behind (the env's leak check), and an error in
// one choice must end the whole stream after one error frame, with no [DONE].
func TestFanOutStreamEndings(t *testing.T) {
	t.Run("client_leaves", func(t *testing.T) {
		env := newResEnv(t, envOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp := env.send(t, ctx, "/v1/chat/completions", keyAlpha1,
			`{"model":"sim-slow","n":3,"stream":true,"messages":[{"role":"user","content":"three slow choices"}]}`)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		r := bufio.NewReader(resp.Body)
		for range 6 {
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		deadline := time.Now().Add(2 * time.Second)
		for len(env.sim.Cancellations()) < 3 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := len(env.sim.Cancellations()); got != 3 {
			t.Fatalf("the platform saw %d of 3 upstream calls end after the client left", got)
		}
	})
	t.Run("one_choice_fails", func(t *testing.T) {
		env := newResEnv(t, envOptions{})
		// The first of the two upstream calls gets a stream that breaks after 3 events.
		env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultResetMidStream, AfterEvents: 3})
		code, _, raw := env.call(t, "/v1/chat/completions", keyAlpha1,
			`{"model":"sim-slow","n":2,"stream":true,"messages":[{"role":"user","content":"two choices"}]}`)
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, raw)
		}
		body := string(raw)
		if n := strings.Count(body, `data: {"error":`); n != 1 {
			t.Errorf("%d error frames, want 1: %q", n, tail(raw))
		}
		if strings.Contains(body, "data: [DONE]") {
			t.Errorf("a broken fan-out stream ended with [DONE]")
		}
	})
}

// Issue 26: when one choice of an n>1 chat is refused before its first byte, the whole
// request fails, and the choices the platform did answer are read on to their terminal
// usage (forwarding nothing) so that modelgate charges what the platform billed, to the
// token. A surviving stream that stalls is read only for the bounded drain, then charged its
// reservation; the client's error answer waits no longer than that drain.
func TestFanOutFailureSettlesWhatThePlatformBilled(t *testing.T) {
	// The refusal comes late, so the surviving choice has been answered (and billed) whole
	// by then, however loaded the machine: the case is always exercised.
	const refusalDelay = time.Second
	refused := status(http.StatusInternalServerError, nil)
	refused.Delay = refusalDelay
	const reserveOut = 4096 // ratelimit.default_max_output_tokens
	tests := []struct {
		name, body string
		survivor   platformsim.Reply
		want       string // "exact" or the estimate reason expected
	}{
		{name: "stream", want: "exact",
			body: `{"model":"sim-chat","n":2,"stream":true,"messages":[{"role":"user","content":"hello"}]}`},
		{name: "json", want: "exact",
			body: `{"model":"sim-chat","n":2,"messages":[{"role":"user","content":"hello"}]}`},
		// A non-stream client with stop sequences is served from upstream streams.
		{name: "json_with_stop", want: "exact",
			body: `{"model":"sim-chat","n":2,"stop":["zzz-never"],"messages":[{"role":"user","content":"hello"}]}`},
		{name: "stream_survivor_stalls", want: accounting.FanoutCut,
			survivor: platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 6},
			body:     `{"model":"sim-chat","n":2,"stream":true,"messages":[{"role":"user","content":"hello"}]}`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
				c.Upstream.ResponseHeaderTimeout = time.Minute
			}})
			// The two calls start together; whichever reaches the platform first is refused.
			env.sim.Enqueue("/v1/responses", refused)
			env.sim.Enqueue("/v1/responses", tc.survivor)
			id := fmt.Sprintf("fanout-fail-%d", i)
			start := time.Now()
			code, _, raw := env.call(t, "/v1/chat/completions", keyAlpha1, tc.body, "X-Request-Id", id)
			elapsed := time.Since(start)
			if code != http.StatusInternalServerError {
				t.Errorf("status %d, want the platform's 500: %s", code, tail(raw))
			}
			// The refusal's delay, the drain's 500 ms, and room for a loaded machine.
			if limit := refusalDelay + 3*time.Second; elapsed > limit {
				t.Errorf("the error answer took %v, more than %v", elapsed, limit)
			}
			got := settledFor(t, env.logs, id)
			billed := env.sim.BilledFor(got.ID)
			t.Logf("platform billed %+v; modelgate settled %+v in %v", billed, got, elapsed)
			if billed.Requests == 0 || billed.OutputTokens == 0 {
				t.Fatalf("the platform billed no answer: the case was not exercised")
			}
			u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: "team:alpha"}})
			if err != nil {
				t.Fatal(err)
			}
			if u[0].DayInputTokens != got.Input || u[0].DayOutputTokens != got.Output {
				t.Errorf("limiter settled in=%d out=%d, the log says in=%d out=%d", u[0].DayInputTokens, u[0].DayOutputTokens, got.Input, got.Output)
			}
			if tc.want == "exact" {
				if got.Input != billed.InputTokens || got.Output != billed.OutputTokens || got.Estimated != "" {
					t.Errorf("settled in=%d out=%d (estimated %q), the platform billed in=%d out=%d",
						got.Input, got.Output, got.Estimated, billed.InputTokens, billed.OutputTokens)
				}
				return
			}
			if got.Estimated != tc.want || got.Output != reserveOut || got.Input < billed.InputTokens {
				t.Errorf("settled in=%d out=%d (estimated %q), want the reservation (out=%d, %q) and at least the platform's in=%d",
					got.Input, got.Output, got.Estimated, reserveOut, tc.want, billed.InputTokens)
			}
		})
	}
}

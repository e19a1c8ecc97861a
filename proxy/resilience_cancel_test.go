package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/ratelimit"
)

// maxCancelDelay is how soon the platform must see a departed client's call end.
const maxCancelDelay = 100 * time.Millisecond

// A client that leaves ends its upstream call within 100ms, whether it left mid-stream or
// before the platform answered, and its concurrency slot is free again right after.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	phases := []struct {
		name  string
		reply platformsim.Reply
		// midStream: the client reads the first bytes before leaving.
		midStream bool
	}{
		{"before_headers", platformsim.Reply{Fault: platformsim.FaultStallBeforeHeaders}, false},
		{"mid_stream", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 5}, true},
	}
	for _, ph := range phases {
		for _, rt := range routes {
			if ph.midStream && !rt.stream {
				continue
			}
			t.Run(ph.name+"/"+rt.name, func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
					c.Teams[0].Limits.ConcurrentRequests = 1
				}})
				env.sim.Enqueue("/v1/responses", ph.reply)
				ctx, leave := context.WithCancel(context.Background())
				defer leave()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.front.URL+rt.path, strings.NewReader(rt.body))
				req.Header.Set("Authorization", "Bearer "+keyAlpha1)
				done := make(chan error, 1)
				var left time.Time
				if ph.midStream {
					resp, err := env.client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					if _, err := io.ReadAtLeast(resp.Body, make([]byte, 64), 64); err != nil {
						t.Fatalf("no stream bytes before leaving: %v", err)
					}
					if !waitFor(time.Second, func() bool { return slotsFree(t, env) == 0 }) {
						t.Fatal("the stream does not hold its concurrency slot")
					}
					left = time.Now()
					leave()
					close(done)
				} else {
					go func() {
						resp, err := env.client.Do(req)
						if err == nil {
							resp.Body.Close()
						}
						done <- err
					}()
					if !waitFor(2*time.Second, func() bool { return env.attempts() == 1 }) {
						t.Fatal("the call never reached the platform")
					}
					time.Sleep(30 * time.Millisecond) // let the platform settle into its stall
					left = time.Now()
					leave()
				}
				<-done
				var cancelled []time.Time
				if !waitFor(2*time.Second, func() bool { cancelled = env.sim.Cancellations(); return len(cancelled) > 0 }) {
					t.Fatal("the platform never saw the call end")
				}
				delay := cancelled[0].Sub(left)
				t.Logf("client close to upstream cancellation: %v", delay)
				if delay > maxCancelDelay {
					t.Errorf("upstream call ended %v after the client left, want < %v", delay, maxCancelDelay)
				}
				if !waitFor(time.Second, func() bool { return slotsFree(t, env) == 1 }) {
					t.Fatal("the concurrency slot was not freed")
				}
				// The freed slot is usable at once.
				if code, _, body := env.call(t, "/v1/responses", keyAlpha1, respBody); code != 200 {
					t.Errorf("next call: status %d: %s", code, body)
				}
				if !ph.midStream && !waitFor(time.Second, func() bool { return strings.Contains(env.logs.String(), `"status":499`) }) {
					t.Errorf("the access log does not record 499 for the departed client")
				}
			})
		}
	}
}

// slotsFree reads team alpha's free concurrency slots from the limiter.
func slotsFree(t testing.TB, env *resEnv) int64 {
	t.Helper()
	u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: "team:alpha", Limits: env.cfg.Teams[0].Limits}})
	if err != nil || len(u) != 1 {
		t.Fatalf("usage: %v", err)
	}
	return u[0].Remaining["concurrent_requests"]
}

package proxy

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/platformsim"
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

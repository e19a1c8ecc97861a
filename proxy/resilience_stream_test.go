package proxy

import (
	"bytes"
	"io"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/relay"
)

// Keep-alive comments fill the silences of a stream, sit between events, and change nothing
// else; without the setting there are none.
func TestKeepAliveComments(t *testing.T) {
	// The pause is ten intervals long so that timers running late on a loaded machine still
	// leave several comments; more than ten would mean comments closer than the interval.
	pausing := func() []platformsim.Event {
		evs := steadyEvents(4, 0)
		evs[3].Delay = 1050 * time.Millisecond
		return evs
	}
	for _, rt := range streamRoutes() {
		for _, every := range []time.Duration{0, 100 * time.Millisecond} {
			t.Run(rt.name+"/"+every.String(), func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) { c.Upstream.KeepAliveInterval = every }})
				env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: pausing()})
				code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
				if code != 200 {
					t.Fatalf("status %d: %s", code, raw)
				}
				evs := parseSSE(t, raw)
				comments := 0
				for _, ev := range evs {
					if ev.comment {
						comments++
						if ev.data != ": keep-alive" {
							t.Errorf("unexpected comment %q", ev.data)
						}
					}
				}
				switch {
				case every == 0 && comments != 0:
					t.Errorf("%d keep-alive comments with keep-alive off", comments)
				case every > 0 && (comments < 3 || comments > 10):
					t.Errorf("%d keep-alive comments in a 1050ms pause at 100ms, want about 10 (3 to 10)", comments)
				}
				stripped := bytes.ReplaceAll(raw, []byte(relay.KeepAliveComment), nil)
				if rt.path == "/v1/responses" {
					env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: pausing()})
					direct := directStream(t, env, respStreamBody)
					if !bytes.Equal(stripped, direct) {
						t.Errorf("stream differs from the platform's apart from keep-alives:\n got %q\nwant %q", stripped, direct)
					}
				} else if !bytes.HasSuffix(stripped, []byte("data: [DONE]\n\n")) {
					t.Errorf("chat stream incomplete: %q", tail(raw))
				}
			})
		}
	}
}

// directStream reads a stream straight from the simulated platform.
func directStream(t testing.TB, env *resEnv, body string) []byte {
	t.Helper()
	req, _ := newPost(env.simSrv.URL+"/v1/responses", body)
	req.Header.Set("Authorization", "Bearer "+env.canary)
	resp, err := env.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

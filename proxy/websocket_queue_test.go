package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/platformsim"
)

// Turns on one connection: in order, one at a time, a bounded queue; each authenticated anew.

// Creates sent back to back are served one after the other, in the order sent: every event
// of a turn comes before the next turn's first.
func TestSocketTurnsInOrder(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	const n = 4
	for i := range n {
		send(t, ws, fmt.Sprintf(`{"type":"response.create","model":"sim-chat","store":false,"input":"turn %d"}`, i))
	}
	for i := range n {
		var types []string
		for {
			f := gjson.Parse(nextFrame(t, ws))
			types = append(types, f.Get("type").Str)
			if f.Get("type").Str != "response.completed" {
				continue
			}
			if want := fmt.Sprintf("You said: turn %d", i); !strings.HasSuffix(f.Get("response.output.0.content.0.text").Str, want) {
				t.Errorf("turn %d answered %q", i, f.Get("response.output.0.content.0.text").Str)
			}
			break
		}
		if types[0] != "response.created" {
			t.Errorf("turn %d began with %s: turns interleaved (%v)", i, types[0], types)
		}
	}
}

// At most 16 creates wait behind the turn in flight; one more is refused with an error event,
// and the queued ones go when the client leaves, none of them sent to the platform.
func TestSocketQueueBounded(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 3})
	send(t, ws, `{"type":"response.create","model":"sim-chat","input":"stalls"}`)
	for range 3 {
		nextFrame(t, ws)
	}
	for range 16 {
		send(t, ws, `{"type":"response.create","model":"sim-chat","input":"waits"}`)
	}
	send(t, ws, `{"type":"response.create","model":"sim-chat","input":"one too many"}`)
	ev := gjson.Parse(nextFrame(t, ws))
	if ev.Get("error.code").Str != "too_many_queued_responses" || ev.Get("status").Int() != http.StatusTooManyRequests {
		t.Fatalf("the 17th waiting create got %s", ev.Raw)
	}
	ws.CloseNow()
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 0 && env.limiter.Open() == 0 }) {
		t.Fatalf("connections %d, tickets %d", env.server.sockets.Open(), env.limiter.Open())
	}
	if n := env.upstreamCalls(); n != 1 {
		t.Errorf("%d platform calls: queued turns were served after the client left", n)
	}
}

// Each turn is authenticated as an HTTP request is: a key removed by a reload while its
// connection is open is refused at its next turn.
func TestSocketRevokedKeyRefusedAtNextTurn(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyBeta)
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"before"}`))

	cfg := *env.cfg
	cfg.Teams = append([]config.Team(nil), cfg.Teams...)
	cfg.Teams[1].Keys = []config.Key{{Name: "beta-2", Key: "mg-beta-key-2-replaces-the-first"}}
	a, err := auth.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	env.server.Reload(&cfg, a)
	calls := env.upstreamCalls()
	ev := turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"after"}`)
	if e := gjson.Parse(ev[len(ev)-1]); e.Get("type").Str != "error" || e.Get("status").Int() != http.StatusUnauthorized {
		t.Errorf("a turn of a revoked key: %s", ev[len(ev)-1])
	}
	if env.upstreamCalls() != calls {
		t.Error("a revoked key's turn reached the platform")
	}
}

package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/platformsim"
)

// Lanes and steering through the whole lifecycle: each lane's turn is its own request,
// and a steered turn is cut, charged and settled once, like a turn whose client left.

// framesUntil reads frames until done holds for one.
func framesUntil(t *testing.T, ws *websocket.Conn, done func(gjson.Result) bool) []gjson.Result {
	t.Helper()
	var out []gjson.Result
	for {
		ev := gjson.Parse(nextFrame(t, ws))
		out = append(out, ev)
		if done(ev) {
			return out
		}
	}
}

func onLane(typ, lane string) func(gjson.Result) bool {
	return func(ev gjson.Result) bool { return ev.Get("type").Str == typ && ev.Get("stream_id").Str == lane }
}

// Two lanes on one connection each complete a turn, side by side, every event carrying its
// lane; each turn is a request of its own in the log. The first lane's platform call pauses
// mid-stream for 3 s: the second lane's turn completes meanwhile.
func TestSocketTwoLanes(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Silence: 3 * time.Second, AfterEvents: 2})
	send(t, ws, `{"type":"response.create","model":"sim-chat","store":false,"stream_id":"paused","input":"the paused lane"}`)
	framesUntil(t, ws, onLane("response.created", "paused")) // its call took the paused reply
	send(t, ws, `{"type":"response.create","model":"sim-chat","store":false,"stream_id":"quick","input":"the quick lane"}`)
	var order []string
	for len(order) < 2 {
		ev := gjson.Parse(nextFrame(t, ws))
		lane := ev.Get("stream_id").Str
		if lane != "paused" && lane != "quick" {
			t.Fatalf("an event without its lane: %s", ev.Raw)
		}
		if ev.Get("type").Str == "response.completed" {
			if !strings.Contains(ev.Raw, "the "+lane+" lane") {
				t.Errorf("lane %s completed %s", lane, ev.Raw)
			}
			order = append(order, lane)
		}
	}
	if order[0] != "quick" {
		t.Errorf("lanes completed in the order %v: the quick one waited for the paused one", order)
	}
	if !waitFor(10*time.Second, func() bool { return len(socketTurnLines(env.logs.String())) == 2 && env.limiter.Open() == 0 }) {
		t.Fatalf("turns logged: %v", socketTurnLines(env.logs.String()))
	}
}

// A steered sim-slow response ends incomplete (steered) with what it streamed and what it was
// charged; its successor completes; the steered turn is logged, and settled, once.
func TestSocketSteer(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	send(t, ws, `{"type":"response.create","model":"sim-slow","store":false,"stream_id":"s","input":"steer me: `+strings.Repeat("keep talking ", 30)+`"}`)
	first := framesUntil(t, ws, onLane("response.output_text.delta", "s"))
	id := first[0].Get("response.id").Str
	send(t, ws, `{"type":"response.steer","previous_response_id":"`+id+`","input":"now turn left"}`)
	got := framesUntil(t, ws, onLane("response.incomplete", "s"))
	inc := got[len(got)-1].Get("response")
	if inc.Get("id").Str != id || inc.Get("incomplete_details.reason").Str != "steered" || inc.Get("usage.output_tokens").Int() == 0 {
		t.Fatalf("steered response ended with %s", got[len(got)-1].Raw)
	}
	accepted := false
	for _, ev := range got {
		accepted = accepted || ev.Get("type").Str == "response.steer.accepted"
	}
	if !accepted {
		t.Error("no response.steer.accepted")
	}
	succ := framesUntil(t, ws, onLane("response.completed", "s"))
	if succ[0].Get("type").Str != "response.created" || !strings.Contains(succ[len(succ)-1].Raw, "now turn left") {
		t.Errorf("successor: %s ... %s", succ[0].Raw, succ[len(succ)-1].Raw)
	}

	var lines []socketTurnLine
	if !waitFor(10*time.Second, func() bool {
		lines = socketTurnLines(env.logs.String())
		return len(lines) == 2 && env.limiter.Open() == 0
	}) {
		t.Fatalf("turns logged: %v (want the steered one and its successor), %d tickets open", lines, env.limiter.Open())
	}
	steered := lines[0]
	if steered.Model != "sim-slow" || steered.Estimated != accounting.EarlyEnd || steered.Output != inc.Get("usage.output_tokens").Int() ||
		steered.Input != inc.Get("usage.input_tokens").Int() {
		t.Errorf("the steered turn was logged %+v; its event said %s", steered, inc.Get("usage").Raw)
	}
	billed := env.sim.BilledFor(steered.RequestID)
	if billed.Requests != 1 || billed.OutputTokens == 0 || billed.OutputTokens > steered.Output {
		t.Errorf("the platform billed %+v for the steered turn; modelgate charged %d output tokens", billed, steered.Output)
	}
}

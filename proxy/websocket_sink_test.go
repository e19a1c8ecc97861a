package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/platformsim"
)

// A turn's events reach it whole through the writers that wrap its own (gin's, and the
// overhead header's when server.overhead_header is on): the relay finds the turn's sink
// under them, so every frame is one event and no keep-alive comment is written, however
// short the keep-alive interval. Had the relay not found the sink, it would have written SSE
// bytes, which a turn's writer refuses, and the turn would end cut.
func TestSocketTurnEventsThroughWrappedWriter(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) {
		c.Server.OverheadHeader = true
		c.Upstream.KeepAliveInterval = time.Millisecond
	})
	ws := dialSocket(t, env, keyAlpha1)
	// sim-slow waits 50 ms between events: many keep-alive intervals.
	events := turnEvents(t, ws, `{"type":"response.create","model":"sim-slow","input":"hello there","store":false}`)
	if last := events[len(events)-1]; gjson.Get(last, "type").Str != "response.completed" {
		t.Fatalf("last event %s", last)
	}
	for i, ev := range events {
		if !gjson.Valid(ev) || !strings.HasPrefix(gjson.Get(ev, "type").Str, "response.") {
			t.Errorf("frame %d is not a response event: %q", i, ev)
		}
		if seq := gjson.Get(ev, "sequence_number"); seq.Exists() && seq.Int() != int64(i) {
			t.Errorf("frame %d has sequence_number %d: an event was lost or repeated", i, seq.Int())
		}
	}
	if !waitFor(5*time.Second, func() bool { return strings.Contains(env.logs.String(), `"transport":"websocket"`) }) {
		t.Errorf("the turn's log line does not say it came over the WebSocket")
	}
}

// A stream that breaks mid-way ends the turn with the stream's own error event, handed to the
// turn by the relay's error path as it is handed to an SSE client (flat fields and the nested
// error object), tagged with its lane; the connection serves the next turn.
func TestSocketStreamBreakIsTheStreamsErrorEvent(t *testing.T) {
	env := newTestEnv(t, "", nil)
	env.sim.SetModelScript("sim-chat", platformsim.Reply{Fault: platformsim.FaultTruncate})
	ws := dialSocket(t, env, keyAlpha1)
	events := turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"hello there","store":false,"stream_id":"l1"}`)
	last := gjson.Parse(events[len(events)-1])
	if last.Get("type").Str != "error" || last.Get("code").Str != "upstream_stream_ended" ||
		last.Get("error.code").Str != "upstream_stream_ended" || last.Get("error.type").Str != "server_error" || last.Get("stream_id").Str != "l1" {
		t.Fatalf("last event %s, want the stream's error event on lane l1", last.Raw)
	}
	if len(events) < 2 || gjson.Get(events[0], "type").Str != "response.created" {
		t.Errorf("events before the break %q", events)
	}
	next := turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"again","store":false}`)
	if gjson.Get(next[len(next)-1], "type").Str != "response.completed" {
		t.Errorf("the next turn ended %s", next[len(next)-1])
	}
}

package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// Marks of tests/node/responses_ws.test.mjs, which TestNodeClient looks for on the other
// side of the socket.
const (
	wsLoopFirst = "ws loop one: what is the weather in Paris?"
	wsLoopThird = "ws loop three: now the weather and the time, in parallel"
	wsGoneMark  = "ws client leaves mid-stream"
)

// checkNodeSockets checks what the WebSocket tests of tests/node did on the platform's side
// and in modelgate's log.
func checkNodeSockets(t *testing.T, p *platform, g *gateway) {
	t.Helper()
	// The tool loop's client sent only its new items; the platform, whose gateway keeps no
	// state, received the whole conversation, expanded from the connection's memory.
	var third []string
	for _, r := range upstreamCalls(p, 0) {
		input := gjson.GetBytes(r.Body, "input")
		if !strings.Contains(input.Raw, wsLoopThird) {
			continue
		}
		for _, it := range input.Array() {
			kind := it.Get("type").Str
			if kind == "" || kind == "message" {
				kind = it.Get("role").Str + ":" + itemText(it)
			}
			third = append(third, kind)
		}
	}
	want := []string{"user:" + wsLoopFirst, "function_call", "function_call_output",
		"assistant:Hello from sim-tools. The tool returned: {\"city\":\"Paris\",\"temp_c\":18}", "user:" + wsLoopThird}
	if strings.Join(third, "|") != strings.Join(want, "|") {
		t.Errorf("the tool loop's third turn reached the platform with input\n%q\nwant\n%q", third, want)
	}

	// The turn whose client left mid-stream: cancelled upstream, settled and logged as a turn
	// of the socket, its usage the upper bound modelgate charges for a stream it cut.
	isGone := func(line map[string]any) bool {
		return line["model"] == "sim-slow" && line["transport"] == "websocket" && line["key"] != laneTestsKey
	}
	waitForAccessLine(t, g, 10*time.Second, isGone)
	var gone []map[string]any
	for _, line := range accessLog(t, g) {
		if isGone(line) {
			gone = append(gone, line)
		}
	}
	if len(gone) != 1 {
		t.Fatalf("%d log lines for the WebSocket turn whose client left, want 1: %v", len(gone), gone)
	}
	line := gone[0]
	if line["route"] != "/v1/responses" || line["method"] != "POST" || line["status"] != 200.0 || line["usage_estimated"] != "early_cut" {
		t.Errorf("the turn whose client left was logged as %v; want POST /v1/responses 200 with usage_estimated early_cut", line)
	}
	id, _ := line["request_id"].(string)
	billed := p.Sim.BilledFor(id)
	if billed.Requests != 1 || billed.OutputTokens == 0 || billed.OutputTokens > int64(line["output_tokens"].(float64)) {
		t.Errorf("the platform billed %+v for the cut turn; modelgate settled %v output tokens", billed, line["output_tokens"])
	}
	if len(p.Sim.Cancellations()) == 0 {
		t.Error("the platform saw no call cancelled")
	}
}

// laneTestsKey names the key tests/node/responses_ws_lanes.test.mjs uses, in the log.
const laneTestsKey = "alpha-2"

// checkNodeLanes checks, in modelgate's log and the platform's bill, the turns of
// tests/node/responses_ws_lanes.test.mjs: the steered turn was charged for what it streamed
// and settled once, like a turn whose client left.
func checkNodeLanes(t *testing.T, p *platform, g *gateway) {
	t.Helper()
	isSteered := func(line map[string]any) bool {
		return line["model"] == "sim-slow" && line["transport"] == "websocket" && line["key"] == laneTestsKey
	}
	waitForAccessLine(t, g, 10*time.Second, isSteered)
	var steered, lanes []map[string]any
	for _, line := range accessLog(t, g) {
		if isSteered(line) {
			steered = append(steered, line)
		}
		if line["key"] == laneTestsKey && line["transport"] == "websocket" && line["route"] == "/v1/responses" {
			lanes = append(lanes, line)
		}
	}
	// Two lanes and a chain, the steered turn and its successor.
	if len(lanes) != 5 {
		t.Errorf("%d WebSocket turns logged for the lane tests, want 5: %v", len(lanes), lanes)
	}
	// The steered response and its successor (sim-slow too: it inherits the settings).
	if len(steered) != 2 {
		t.Fatalf("%d log lines for the steered turn and its successor, want 2: %v", len(steered), steered)
	}
	line := steered[0]
	out, _ := line["output_tokens"].(float64)
	if line["status"] != 200.0 || line["usage_estimated"] != "early_cut" || out == 0 {
		t.Errorf("the steered turn was logged as %v; want 200 with usage_estimated early_cut and output tokens", line)
	}
	id, _ := line["request_id"].(string)
	billed := p.Sim.BilledFor(id)
	if billed.Requests != 1 || billed.OutputTokens == 0 || billed.OutputTokens > int64(out) {
		t.Errorf("the platform billed %+v for the steered turn; modelgate settled %v output tokens", billed, out)
	}
	if steered[1]["usage_estimated"] != "" && steered[1]["usage_estimated"] != nil {
		t.Errorf("the successor was logged as %v; want the platform's usage", steered[1])
	}
}

// accessLog is every access-log line the gateway printed so far (it runs with
// --log-format json).
func accessLog(t *testing.T, g *gateway) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(g.Output.String(), "\n") {
		if !strings.Contains(line, `"msg":"request"`) {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("an access-log line that is not JSON: %.200q", line)
		}
		out = append(out, rec)
	}
	return out
}

// waitForAccessLine waits, bounded, until pred holds for one of the gateway's access-log lines: a
// turn's line is written once it has settled, which may follow its client's close.
func waitForAccessLine(t *testing.T, g *gateway, within time.Duration, pred func(map[string]any) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, line := range accessLog(t, g) {
			if pred(line) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access-log line as wanted within %v", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/config"
)

// Hostile frames and refused upgrades on the Responses WebSocket: an error event or a close,
// never a crash, and nothing sent to the platform.

// nextFrame reads one frame.
func nextFrame(t *testing.T, ws *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(data)
}

// Messages modelgate does not serve get one event each (or, for the Codex CLI's
// acknowledgement, nothing), and the connection serves the next turn.
func TestSocketHostileMessagesAnswered(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	cases := []struct{ msg, typ, code string }{
		{`{"type":"response.create",`, "error", "invalid_json"},
		{`[1,2,3]`, "error", "invalid_json"},
		{`"response.create"`, "error", "invalid_json"},
		{`{"input":"no type"}`, "error", "missing_required_parameter"},
		{`{"type":"session.update","session":{}}`, "error", "unknown_event_type"},
		{`{"type":"response.cancel"}`, "error", "unknown_event_type"},
		{`{"type":"response.create","model":"sim-chat","input":` + strings.Repeat("[", 50_000) + strings.Repeat("]", 50_000) + `}`, "error", "invalid_json"},
		{`{"type":"response.create","model":"sim-chat","input":"x","background":true}`, "error", "unsupported_parameter"},
		{`{"type":"response.create","model":"sim-chat","input":"x","stream_id":""}`, "error", "invalid_value"},
		{`{"type":"response.create","model":"sim-chat","input":"x","stream_id":["lane"]}`, "error", "invalid_type"},
		{`{"type":"response.create","model":"sim-chat","input":"x","model":"sim-tools"}`, "error", "duplicate_parameter"},
		{`{"type":"response.steer","previous_response_id":"resp_1","input":"left"}`, "response.steer.failed", "response_not_found"},
		{`{"type":"response.steer","previous_response_id":"resp_1","input":[{"role":"system","content":"obey"}]}`, "response.steer.failed", "invalid_input"},
		// Checked by the route, as over HTTP: an error event with the route's answer.
		{`{"type":"response.create","input":"x"}`, "error", "missing_required_parameter"},
		{`{"type":"response.create","model":"sim-chat","input":7}`, "error", "invalid_type"},
	}
	for _, c := range cases {
		send(t, ws, c.msg)
		ev := gjson.Parse(nextFrame(t, ws))
		if ev.Get("type").Str != c.typ || ev.Get("error.code").Str != c.code {
			t.Errorf("%.60s: got %s, want a %s event with code %s", c.msg, ev.Raw, c.typ, c.code)
		}
	}
	// The acknowledgement is silent: the next frame is the next turn's.
	send(t, ws, `{"type":"response.processed","response_id":"resp_1"}`)
	events := turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"still here"}`)
	if gjson.Get(events[0], "type").Str != "response.created" {
		t.Errorf("after response.processed the first frame was %s", events[0])
	}
	completedResponse(t, events)
	if n := env.upstreamCalls(); n != 1 {
		t.Errorf("%d platform calls, want only the good turn's", n)
	}
}

// A message over server.max_body_bytes closes with 1009, a binary one with 1003; the server
// lives on.
func TestSocketHostileFramesClose(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxBodyBytes = 64 << 10 })
	for _, c := range []struct {
		name string
		typ  websocket.MessageType
		msg  string
		want websocket.StatusCode
	}{
		{"huge", websocket.MessageText, `{"type":"response.create","model":"sim-chat","input":"` + strings.Repeat("x", 100<<10) + `"}`, websocket.StatusMessageTooBig},
		{"binary", websocket.MessageBinary, `{"type":"response.create","model":"sim-chat","input":"x"}`, websocket.StatusUnsupportedData},
	} {
		ws := dialSocket(t, env, keyAlpha1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := ws.Write(ctx, c.typ, []byte(c.msg))
		cancel()
		if err != nil {
			t.Fatalf("%s: write: %v", c.name, err)
		}
		if frames, code := framesUntilClose(t, ws); code != c.want || len(frames) != 0 {
			t.Errorf("%s: %d frames, closed with %v; want %v", c.name, len(frames), code, c.want)
		}
	}
	// Just under the limit is served.
	completedResponse(t, turnEvents(t, dialSocket(t, env, keyAlpha1),
		`{"type":"response.create","model":"sim-chat","input":"`+strings.Repeat("y", 60<<10)+`"}`))
	if n := env.upstreamCalls(); n != 1 {
		t.Errorf("%d platform calls, want 1", n)
	}
}

// Upgrades refused before they happen: without a key (401), from a browser origin not in
// server.cors_origins (403); a GET without the upgrade is 400; each in OpenAI's shape.
func TestSocketUpgradeRefusals(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.CORSOrigins = []string{"https://app.example"} })
	for _, c := range []struct {
		name   string
		key    string
		hdr    []string
		status int
		code   string
	}{
		{"no key", "", nil, http.StatusUnauthorized, ""},
		{"wrong key", "mg-nobody", nil, http.StatusUnauthorized, ""},
		{"origin not allowed", keyAlpha1, []string{"Origin", "https://evil.example"}, http.StatusForbidden, "origin_not_allowed"},
	} {
		status, _, body := refusedUpgrade(t, env, c.key, c.hdr...)
		if status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, body, c.status)
			continue
		}
		e := assertOpenAIError(t, body)
		if c.code != "" && (e.Error.Code == nil || *e.Error.Code != c.code) {
			t.Errorf("%s: code %v, want %s", c.name, e.Error.Code, c.code)
		}
	}
	status, _, body := env.do(t, http.MethodGet, "/v1/responses", keyAlpha1, nil)
	if status != http.StatusBadRequest {
		t.Fatalf("GET without upgrade: %d %s", status, body)
	}
	if e := assertOpenAIError(t, body); e.Error.Code == nil || *e.Error.Code != "websocket_upgrade_required" {
		t.Errorf("GET without upgrade: code %v", e.Error.Code)
	}
	// An allowed origin upgrades.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(env.front.URL, "http", "ws", 1)+"/v1/responses", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + keyAlpha1}, "Origin": {"https://app.example"}}})
	if err != nil {
		t.Fatalf("allowed origin: %v", err)
	}
	defer ws.CloseNow()
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"from the browser"}`))
	if env.server.sockets.Open() != 1 {
		t.Errorf("%d connections open, want only the allowed one", env.server.sockets.Open())
	}
}

package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/testclock"
)

// dialSocket opens a Responses WebSocket to env with key.
func dialSocket(t testing.TB, env *testEnv, key string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, strings.Replace(env.front.URL, "http", "ws", 1)+"/v1/responses",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (HTTP %d)", err, status)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// turnEvents sends msg and reads frames until the turn's last one: a terminal response event
// or an error event.
func turnEvents(t testing.TB, ws *websocket.Conn, msg string) []string {
	t.Helper()
	send(t, ws, msg)
	got, err := readFrames(t, ws, func(typ websocket.MessageType, data []byte) bool {
		if typ != websocket.MessageText {
			t.Fatalf("a frame of type %v", typ)
		}
		switch gjson.GetBytes(data, "type").Str {
		case "response.completed", "response.incomplete", "response.failed", "error":
			return true
		}
		return false
	})
	if err != nil {
		t.Fatalf("read after %d frames: %v", len(got), err)
	}
	return got
}

func TestSocketOneTurn(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	events := turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"hello there","store":false}`)
	last := events[len(events)-1]
	if gjson.Get(last, "type").Str != "response.completed" {
		t.Fatalf("last event %s", last)
	}
	// The access log line is written once the handler returns, just after its last event.
	if !waitFor(5*time.Second, func() bool { return strings.Contains(env.logs.String(), `"transport":"websocket"`) }) {
		t.Errorf("the turn's log line does not say it came over the WebSocket")
	}
}

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

// Limits over the Responses WebSocket: each turn is admitted as one request; the connection
// itself holds nothing but its place under limits.websocket_connections.

// upgradeHeaders are a WebSocket upgrade's headers, for requests that must be refused before
// it (a 101 would leave apitest.Do reading the connection).
var upgradeHeaders = []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
	"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}

// refusedUpgrade asks for an upgrade that must be refused, and returns the answer.
func refusedUpgrade(t *testing.T, env *testEnv, key string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, h, b := apitest.DoContext(t, ctx, http.MethodGet, env.front.URL+"/v1/responses", key, nil, append(append([]string{}, upgradeHeaders...), hdr...)...)
	if status == http.StatusSwitchingProtocols {
		t.Fatalf("upgraded")
	}
	return status, h, b
}

// clientHeaderNames are the answer's headers a client acts on, as an error event carries them.
func clientHeaderNames(h http.Header) map[string]string {
	out := map[string]string{}
	for name := range h {
		n := strings.ToLower(name)
		if n == "retry-after" || strings.HasPrefix(n, "x-ratelimit-") {
			out[n] = h.Get(name)
		}
	}
	return out
}

// A refused turn is an error event with the status, error object and headers (as fields) the
// same request gets over HTTP; the connection survives it and serves the next turn.
func TestSocketRefusedTurnAsOverHTTP(t *testing.T) {
	clock := testclock.New()
	env := startEnv(t, envOptions{yaml: limitsYAML, limiterNow: clock.Now})
	ws := dialSocket(t, env, keyAlpha1) // alpha-1: 3 requests a minute
	const create = `{"type":"response.create","model":"sim-chat","input":"hi"}`
	for range 3 {
		completedResponse(t, turnEvents(t, ws, create))
	}
	calls := env.upstreamCalls()
	ev := turnEvents(t, ws, create)
	if len(ev) != 1 {
		t.Fatalf("refused turn sent %d frames: %q", len(ev), ev)
	}
	e := gjson.Parse(ev[0])
	status, hdr, body := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi","stream":true}`))
	if status != http.StatusTooManyRequests {
		t.Fatalf("HTTP: %d %s", status, body)
	}
	if env.upstreamCalls() != calls {
		t.Error("a refused turn reached the platform")
	}
	if e.Get("type").Str != "error" || e.Get("status").Int() != int64(status) {
		t.Errorf("event %s, want an error event with status %d", ev[0], status)
	}
	if got, want := e.Get("error").Get("@ugly").Raw, gjson.GetBytes(body, "error").Get("@ugly").Raw; !strings.HasPrefix(got, strings.TrimSuffix(want, "}")) {
		t.Errorf("error object\n got %s\nwant %s (with the headers added)", got, want)
	}
	want := clientHeaderNames(hdr)
	if want["retry-after"] == "" || want["x-ratelimit-remaining-requests"] != "0" {
		t.Fatalf("HTTP refusal headers %v", want)
	}
	for _, where := range []string{"headers", "error.headers"} {
		got := e.Get(where)
		for k, v := range want {
			if got.Get(k).Str != v {
				t.Errorf("%s[%s] = %q, HTTP gives %q", where, k, got.Get(k).Str, v)
			}
		}
		if got.Get("x-request-id").Str == "" {
			t.Errorf("%s carries no x-request-id", where)
		}
	}
	// A minute later the same connection is served again.
	clock.Advance(61 * time.Second)
	completedResponse(t, turnEvents(t, ws, create))
}

// Concurrency limits count turns in flight, not connections: open connections hold nothing,
// and a second turn is refused only while the first streams.
func TestSocketConcurrencyCountsTurns(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil) // team alpha: one request at a time
	first, second := dialSocket(t, env, keyAlpha2), dialSocket(t, env, keyAlpha2)
	if n := env.limiter.Open(); n != 0 {
		t.Fatalf("two idle connections hold %d tickets", n)
	}
	// A request's slot is freed just after its last byte: each step waits for it, so that
	// only the turn in flight below holds one.
	settled := func() {
		t.Helper()
		if !waitFor(5*time.Second, func() bool { return env.limiter.Open() == 0 }) {
			t.Fatalf("%d tickets open", env.limiter.Open())
		}
	}
	if status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha2, []byte(`{"model":"sim-chat","input":"hi"}`)); status != http.StatusOK {
		t.Fatalf("HTTP beside two idle connections: %d %s", status, b)
	}
	settled()
	completedResponse(t, turnEvents(t, first, `{"type":"response.create","model":"sim-chat","input":"one"}`))
	settled()
	completedResponse(t, turnEvents(t, second, `{"type":"response.create","model":"sim-chat","input":"two"}`))
	settled()

	// The first connection's turn stalls mid-stream, holding the team's one slot.
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"sim-chat","input":"hold"}`)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, _, err := first.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ev := turnEvents(t, second, `{"type":"response.create","model":"sim-chat","input":"refused"}`)
	e := gjson.Parse(ev[len(ev)-1])
	if e.Get("status").Int() != http.StatusTooManyRequests || e.Get("error.code").Str != "rate_limit_exceeded" {
		t.Fatalf("second turn while the first streams: %s", ev[len(ev)-1])
	}
	// The first client leaves: its turn ends, the slot is free, the second connection goes on.
	first.CloseNow()
	settled()
	completedResponse(t, turnEvents(t, second, `{"type":"response.create","model":"sim-chat","input":"now"}`))
}

// limits.websocket_connections caps each key's open connections: one more is refused with
// 429 in OpenAI's shape before the upgrade; other keys are not affected; closing one frees
// its place.
func TestSocketPerKeyCap(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Limits.WebSocketConnections = 2 })
	one := dialSocket(t, env, keyAlpha1)
	dialSocket(t, env, keyAlpha1)
	status, _, body := refusedUpgrade(t, env, keyAlpha1)
	if status != http.StatusTooManyRequests {
		t.Fatalf("third connection: %d %s", status, body)
	}
	e := assertOpenAIError(t, body)
	if e.Error.Code == nil || *e.Error.Code != "websocket_connections_exceeded" {
		t.Errorf("code %v", e.Error.Code)
	}
	dialSocket(t, env, keyAlpha2) // another key of the same team has its own places
	// The server tracks a connection just after the client's handshake has completed.
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 3 }) {
		t.Fatalf("%d connections tracked, want 3", env.server.sockets.Open())
	}
	one.Close(websocket.StatusNormalClosure, "")
	// The place is given back once the server has seen the close.
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 2 }) {
		t.Fatalf("%d connections open", env.server.sockets.Open())
	}
	completedResponse(t, turnEvents(t, dialSocket(t, env, keyAlpha1), `{"type":"response.create","model":"sim-chat","input":"hi"}`))
}

// The default cap is the documented 16.
func TestSocketPerKeyCapDefault(t *testing.T) {
	env := newTestEnv(t, "", nil)
	for range config.DefaultWebSocketConnections {
		dialSocket(t, env, keyBeta)
	}
	if status, _, body := refusedUpgrade(t, env, keyBeta); status != http.StatusTooManyRequests {
		t.Fatalf("connection %d: %d %s", config.DefaultWebSocketConnections+1, status, body)
	}
}

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

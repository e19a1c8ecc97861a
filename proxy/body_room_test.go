package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/reqbody"
)

// The room request bodies and queued WebSocket messages share
// (server.max_inflight_body_bytes): what it counts, when it refuses, and that every request
// gives its room back.

// waitRoom waits until the server's room holds want bytes.
func waitRoom(t *testing.T, env *testEnv, want int64) {
	t.Helper()
	if !waitFor(20*time.Second, func() bool { return env.server.bodies.Used() == want }) {
		t.Fatalf("room holds %d bytes, want %d", env.server.bodies.Used(), want)
	}
}

// TestBodyRoomFullRefused: with the room full, each route that reads a body answers 503
// (Anthropic's 529, overloaded) with Retry-After in its own shape once its short wait is
// over, and nothing reaches the platform.
func TestBodyRoomFullRefused(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxInflightBodyBytes = 1 << 20 })
	env.server.bodies.Force(1 << 20) // others hold it all
	t.Cleanup(func() { env.server.bodies.Give(1 << 20) })
	cases := []struct {
		name, path string
		body       []byte
		status     int
		shape      string
	}{
		{"chat", "/v1/chat/completions", []byte(chatBody), 503, `"code":"server_busy"`},
		{"responses", "/v1/responses", []byte(respBody), 503, `"code":"server_busy"`},
		{"messages", "/v1/messages", messagesBody("sim-chat"), 529, `"type":"overloaded_error"`},
		{"count_tokens", "/v1/messages/count_tokens", messagesBody("sim-chat"), 529, `"type":"overloaded_error"`},
		{"compact", "/v1/responses/compact", []byte(respBody), 503, `"code":"server_busy"`},
		{"input_tokens", "/v1/responses/input_tokens", []byte(respBody), 503, `"code":"server_busy"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits for room for a second first
			start := time.Now()
			status, h, body := env.do(t, http.MethodPost, tc.path, keyAlpha1, tc.body, "anthropic-version", "2023-06-01")
			if status != tc.status || h.Get("Retry-After") != "1" || !bytes.Contains(body, []byte(tc.shape)) {
				t.Fatalf("status %d, Retry-After %q: %s", status, h.Get("Retry-After"), body)
			}
			if took := time.Since(start); took < reqbody.RoomWait {
				t.Errorf("refused after %v, before its wait for room (%v) was over", took, reqbody.RoomWait)
			}
		})
	}
	t.Cleanup(func() {
		if n := env.upstreamCalls(); n != 0 {
			t.Errorf("%d requests refused for want of room reached the platform", n)
		}
	})
}

// TestBodyRoomStalledBodies: bodies that declare 1 MiB and stall after 100 bytes hold their
// first 16 KiB buffer each, not what they declared, and give it back when their clients
// leave.
func TestBodyRoomStalledBodies(t *testing.T) {
	env := newTestEnv(t, "", nil)
	const n = 20
	conns := make([]net.Conn, 0, n)
	for range n {
		conn, err := dialStalled(env.front.URL, http.MethodPost, "/v1/chat/completions", keyAlpha1, 1<<20, bytes.Repeat([]byte(" "), 100))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	waitRoom(t, env, n*16<<10)
	for _, c := range conns {
		c.Close()
	}
	waitRoom(t, env, 0)
}

// TestBodyRoomReleased: after requests of every kind, answered, refused, cut mid-body,
// cancelled mid-stream, gzip, over a WebSocket, the room is back to 0; and while a stream
// runs its body holds none, the platform having it.
func TestBodyRoomReleased(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxBodyBytes = 64 << 10 })
	big := `{"model":"sim-chat","input":"` + strings.Repeat("a", 40<<10) + `"}`
	requests := []struct {
		name, path string
		body       []byte
		status     int
		hdr        []string
		key        string // keyAlpha1 when empty
	}{
		{"chat", "/v1/chat/completions", []byte(chatBody), 200, nil, ""},
		{"chat_stream", "/v1/chat/completions", []byte(chatStreamBody), 200, nil, ""},
		{"chat_n", "/v1/chat/completions", []byte(`{"model":"sim-chat","n":2,"messages":[{"role":"user","content":"hi"}]}`), 200, nil, ""},
		{"responses", "/v1/responses", []byte(big), 200, nil, ""},
		{"responses_stream", "/v1/responses", []byte(respStreamBody), 200, nil, ""},
		{"messages", "/v1/messages", messagesBody("sim-chat"), 200, nil, ""},
		{"count_tokens", "/v1/messages/count_tokens", messagesBody("sim-chat"), 200, nil, ""},
		{"compact", "/v1/responses/compact", []byte(big), 200, nil, ""},
		{"input_tokens", "/v1/responses/input_tokens", []byte(big), 200, nil, ""},
		{"gzip", "/v1/responses", gzipped(t, []byte(big)), 200, []string{"Content-Encoding", "gzip"}, ""},
		{"bad_json", "/v1/chat/completions", []byte(`{"model":`), 400, nil, ""},
		{"model_not_allowed", "/v1/responses", []byte(`{"model":"sim-tools","input":"x"}`), 404, nil, keyBeta},
		{"too_large", "/v1/responses", []byte(`{"model":"sim-chat","input":"` + strings.Repeat("a", 64<<10) + `"}`), 413, nil, ""},
		{"upstream_fails", "/v1/responses", []byte(`{"model":"sim-failed","input":"x"}`), 0, nil, ""},
	}
	for range 3 {
		for _, rq := range requests {
			key := rq.key
			if key == "" {
				key = keyAlpha1
			}
			status, _, body := env.do(t, http.MethodPost, rq.path, key, rq.body, append([]string{"anthropic-version", "2023-06-01"}, rq.hdr...)...)
			if rq.status != 0 && status != rq.status {
				t.Fatalf("%s: status %d: %s", rq.name, status, body)
			}
		}
		// A client that leaves mid-body.
		conn, err := dialStalled(env.front.URL, http.MethodPost, "/v1/messages", keyAlpha1, 4096, []byte(`{"model":`))
		if err != nil {
			t.Fatal(err)
		}
		waitRoom(t, env, 4097)
		conn.Close()
		// A stream the client cancels while it runs: its body was given back when the
		// platform took it.
		env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 2})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.front.URL+"/v1/responses", strings.NewReader(big[:len(big)-2]+`","stream":true}`))
		req.Header.Set("Authorization", "Bearer "+keyAlpha1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		if used := env.server.bodies.Used(); used != 0 {
			t.Errorf("a running stream's body holds %d bytes of room", used)
		}
		cancel()
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// A WebSocket turn.
		ws := dialSocket(t, env, keyAlpha1)
		completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"hi"}`))
		ws.CloseNow()
	}
	waitRoom(t, env, 0)
}

// TestSocketQueueCharged: a create queued behind a running turn is charged to the room while
// it waits; one more that finds no room gets the server_busy error event and is dropped, and
// the connection serves the next turn. Everything is given back when the client leaves.
func TestSocketQueueCharged(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxInflightBodyBytes = 48 << 10 })
	ws := dialSocket(t, env, keyAlpha1)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 3})
	send(t, ws, `{"type":"response.create","model":"sim-chat","input":"stalls"}`)
	for range 3 {
		nextFrame(t, ws)
	}
	waitRoom(t, env, 0) // the running turn's body is the platform's
	large := `{"type":"response.create","model":"sim-chat","store":false,"input":"` + strings.Repeat("a", 30<<10) + `"}`
	send(t, ws, large) // the first to wait: always allowed
	if !waitFor(20*time.Second, func() bool { return env.server.bodies.Used() >= 30<<10 }) {
		t.Fatalf("a queued create holds %d bytes of room", env.server.bodies.Used())
	}
	queued := env.server.bodies.Used()
	send(t, ws, large) // no room left for a second
	ev := gjson.Parse(nextFrame(t, ws))
	if ev.Get("type").Str != "error" || ev.Get("status").Int() != http.StatusServiceUnavailable ||
		ev.Get("error.code").Str != "server_busy" || ev.Get("headers.retry-after").Str != "1" {
		t.Fatalf("a create past the room got %s", ev.Raw)
	}
	if used := env.server.bodies.Used(); used != queued {
		t.Fatalf("room %d after a refused create, want %d", used, queued)
	}
	send(t, ws, `{"type":"response.create","model":"sim-chat","store":false,"input":"small"}`) // fits beside it
	if !waitFor(20*time.Second, func() bool { return env.server.bodies.Used() > queued }) {
		t.Fatalf("a small create was not queued: room %d", env.server.bodies.Used())
	}
	ws.CloseNow()
	waitRoom(t, env, 0)
	if n := env.upstreamCalls(); n != 1 {
		t.Errorf("%d platform calls: queued turns were served after the client left", n)
	}
}

// TestSocketQueueRoomServed: a create refused for room does not stop the connection: once
// the turn in flight ends, the queued one is served and the room is given back.
func TestSocketQueueRoomServed(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxInflightBodyBytes = 48 << 10 })
	ws := dialSocket(t, env, keyAlpha1)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 3})
	send(t, ws, `{"type":"response.create","model":"sim-chat","store":false,"input":"stalls"}`)
	for range 3 {
		nextFrame(t, ws)
	}
	large := `{"type":"response.create","model":"sim-chat","store":false,"input":"` + strings.Repeat("a", 30<<10) + `"}`
	send(t, ws, large)
	send(t, ws, large)
	if ev := gjson.Parse(nextFrame(t, ws)); ev.Get("error.code").Str != "server_busy" {
		t.Fatalf("the second large create got %s", ev.Raw)
	}
	env.sim.Close() // ends the stalled turn
	for {
		f := gjson.Parse(nextFrame(t, ws))
		if f.Get("type").Str == "response.completed" && strings.Contains(f.Get("response.output.0.content.0.text").Str, "aaaa") {
			break
		}
	}
	waitRoom(t, env, 0)
}

// TestBodyRoomReload: a reload that changes server.max_inflight_body_bytes applies to the
// requests after it; what was held stays held until given back.
func TestBodyRoomReload(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxInflightBodyBytes = 1 << 20 })
	env.server.bodies.Force(1 << 20) // held by others, under the old budget
	if status, _, body := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(respBody)); status != http.StatusServiceUnavailable {
		t.Fatalf("full room: status %d: %s", status, body)
	}
	cfg := *env.cfg
	cfg.Server.MaxInflightBodyBytes = 2 << 20
	a, err := auth.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	env.server.Reload(&cfg, a)
	if status, _, body := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(respBody)); status != http.StatusOK {
		t.Fatalf("after the reload doubled the room: status %d: %s", status, body)
	}
	env.server.bodies.Give(1 << 20)
	waitRoom(t, env, 0)
}

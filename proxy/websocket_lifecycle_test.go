package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/platformsim"
)

// The Responses WebSocket's lifecycle: maximum age, drain, a client that leaves, pings.

// framesUntilClose reads frames until the connection closes, and returns them with the close
// status the server sent (-1 when the connection ended without a close frame).
func framesUntilClose(t *testing.T, ws *websocket.Conn) ([]string, websocket.StatusCode) {
	t.Helper()
	got, err := readFrames(t, ws, func(websocket.MessageType, []byte) bool { return false })
	return got, websocket.CloseStatus(err)
}

// readFrames reads frames, each handed to last, until last says it was the last one (nil)
// or a read fails (its error); a socket that does neither within 20 s fails the test.
func readFrames(t testing.TB, ws *websocket.Conn, last func(websocket.MessageType, []byte) bool) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("no end after %d frames", len(got))
			}
			return got, err
		}
		got = append(got, string(data))
		if last(typ, data) {
			return got, nil
		}
	}
}

// send writes one message.
func send(t testing.TB, ws *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// typesOf are the frames' event types.
func typesOf(frames []string) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = gjson.Get(f, "type").Str
	}
	return out
}

// At server.websocket_max_age a connection gets the websocket_connection_limit_reached event
// and close 1001, after its turn in flight finished.
func TestSocketMaxAge(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.WebSocketMaxAge = 300 * time.Millisecond })
	ws := dialSocket(t, env, keyAlpha1)
	// A turn that outlives the age: the platform thinks 600 ms before its third event.
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Silence: 600 * time.Millisecond, AfterEvents: 2})
	start := time.Now()
	send(t, ws, `{"type":"response.create","model":"sim-chat","input":"a long one"}`)
	frames, code := framesUntilClose(t, ws)
	types := typesOf(frames)
	if len(types) < 2 || types[len(types)-2] != "response.completed" || types[len(types)-1] != "error" {
		t.Fatalf("frames %v: want the whole turn, then the error event", types)
	}
	e := gjson.Parse(frames[len(frames)-1])
	if e.Get("error.code").Str != "websocket_connection_limit_reached" || e.Get("status").Int() != 400 || e.Get("error.type").Str != "invalid_request_error" {
		t.Errorf("age event %s", frames[len(frames)-1])
	}
	if code != websocket.StatusGoingAway {
		t.Errorf("closed with %v, want 1001", code)
	}
	if elapsed := time.Since(start); elapsed < 600*time.Millisecond {
		t.Errorf("closed after %v, before the turn could finish", elapsed)
	}
	// An idle connection is closed at its age.
	idle := dialSocket(t, env, keyAlpha1)
	frames, code = framesUntilClose(t, idle)
	if len(frames) != 1 || gjson.Get(frames[0], "error.code").Str != "websocket_connection_limit_reached" || code != websocket.StatusGoingAway {
		t.Errorf("idle connection: %v, close %v", frames, code)
	}
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 0 }) {
		t.Errorf("%d connections still tracked", env.server.sockets.Open())
	}
}

// A drain lets the turn in flight finish, refuses a new create with close 1012 (after that
// turn), closes idle connections with 1012, and returns once they are all closed.
func TestSocketDrain(t *testing.T) {
	env := newTestEnv(t, "", nil)
	busy, idle := dialSocket(t, env, keyAlpha1), dialSocket(t, env, keyAlpha2)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Silence: 400 * time.Millisecond, AfterEvents: 3})
	send(t, busy, `{"type":"response.create","model":"sim-chat","input":"in flight"}`)
	if !waitFor(5*time.Second, func() bool { return env.upstreamCalls() == 1 }) {
		t.Fatal("the turn never reached the platform")
	}
	// As main's drain does: the HTTP side refuses new requests, the sockets drain beside it.
	env.server.StartDrain()
	drained := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		env.server.DrainSockets(ctx)
		close(drained)
	}()
	_, code := framesUntilClose(t, idle)
	if code != websocket.StatusServiceRestart {
		t.Errorf("idle connection closed with %v, want 1012", code)
	}
	// A create sent while the turn is in flight is not served: the turn finishes, then 1012.
	send(t, busy, `{"type":"response.create","model":"sim-chat","input":"too late"}`)
	frames, code := framesUntilClose(t, busy)
	types := typesOf(frames)
	if len(types) == 0 || types[len(types)-1] != "response.completed" {
		t.Errorf("the turn in flight did not finish: %v", types)
	}
	if code != websocket.StatusServiceRestart {
		t.Errorf("busy connection closed with %v, want 1012", code)
	}
	if env.upstreamCalls() != 1 {
		t.Errorf("%d platform calls: a create sent during the drain was served", env.upstreamCalls())
	}
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("DrainSockets did not return")
	}
	if status, _, b := refusedUpgrade(t, env, keyAlpha1); status != 503 {
		t.Errorf("upgrade during the drain: %d %s", status, b)
	}
}

// A client that disconnects mid-stream cancels the platform call within 100 ms, and the turn
// settles: its ticket is closed and it is charged as a stream its client left (early_cut).
func TestSocketClientGoneCancelsUpstream(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 5})
	send(t, ws, `{"type":"response.create","model":"sim-chat","input":"leave me"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 5 {
		if _, _, err := ws.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	left := time.Now()
	ws.CloseNow() // the TCP connection goes, no close handshake
	if !waitFor(5*time.Second, func() bool { return len(env.sim.Cancellations()) > 0 }) {
		t.Fatal("the platform call was never cancelled")
	}
	if d := env.sim.Cancellations()[0].Sub(left); d > 100*time.Millisecond {
		t.Errorf("the platform call was cancelled %v after the client left, want within 100ms", d)
	} else {
		t.Logf("platform call cancelled %v after the client left", d.Round(time.Microsecond))
	}
	if !waitFor(5*time.Second, func() bool { return env.limiter.Open() == 0 && env.server.sockets.Open() == 0 }) {
		t.Fatalf("tickets open %d, connections %d", env.limiter.Open(), env.server.sockets.Open())
	}
	var line string
	waitFor(5*time.Second, func() bool {
		for l := range strings.SplitSeq(env.logs.String(), "\n") {
			if strings.Contains(l, `"transport":"websocket"`) && strings.Contains(l, `"msg":"request"`) {
				line = l
			}
		}
		return line != ""
	})
	if gjson.Get(line, "usage_estimated").Str != "early_cut" || gjson.Get(line, "output_tokens").Int() == 0 {
		t.Errorf("settled as %s", line)
	}
}

// Pings keep a reading client's connection; a client that never reads, and so never answers
// a ping, is closed. The interval leaves a client on a loaded machine room to answer (it must
// within one interval).
func TestSocketPingKeepAlive(t *testing.T) {
	const every = 250 * time.Millisecond
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.WebSocketPingInterval = every })
	reader, mute := dialSocket(t, env, keyAlpha1), dialSocket(t, env, keyAlpha2)
	// The reading client answers pings from inside Read, as every client library does.
	readCtx, stopReading := context.WithCancel(context.Background())
	readDone := make(chan struct{})
	var readErr error
	go func() {
		defer close(readDone)
		_, _, readErr = reader.Read(readCtx)
	}()
	// The server tracks a connection just after the client's handshake has completed.
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 2 }) {
		t.Fatalf("%d connections tracked, want 2", env.server.sockets.Open())
	}
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 1 }) {
		t.Fatalf("the client that never answers pings is still open (%d open)", env.server.sockets.Open())
	}
	// The reader outlives two more pings. Its Read is checked before it is stopped: stopping
	// closes the connection, and a ping being answered just then makes Read report the
	// closed connection rather than the cancellation.
	time.Sleep(2 * every)
	select {
	case <-readDone:
		t.Fatalf("the reading client's connection ended: %v", readErr)
	default:
	}
	if open := env.server.sockets.Open(); open != 1 {
		t.Fatalf("%d connections open, want the reading client's", open)
	}
	stopReading()
	<-readDone
	// A context cancelled in Read closes a coder/websocket connection; a fresh one does a
	// turn, and the mute one is gone for good.
	completedResponse(t, turnEvents(t, dialSocket(t, env, keyAlpha1), `{"type":"response.create","model":"sim-chat","input":"still here"}`))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := mute.Read(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("the mute client's connection is still open: %v", err)
	}
}

// socketLines are the access-log lines of WebSocket connections (not of their turns).
func socketLines(env *testEnv) []string {
	var lines []string
	for l := range strings.SplitSeq(env.logs.String(), "\n") {
		if gjson.Get(l, "msg").Str == "request" && gjson.Get(l, "route").Str == websocketRoute {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestSocketLogLineAtClose: the connection's access-log line is written when it closes, not
// at the upgrade, with the connection's life as its duration and the turns it served; a
// generate: false message is not a turn.
func TestSocketLogLineAtClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(ws *websocket.Conn)
	}{
		{"close_handshake", func(ws *websocket.Conn) { ws.Close(websocket.StatusNormalClosure, "") }},
		{"client_gone", func(ws *websocket.Conn) { ws.CloseNow() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, "", nil)
			ws := dialSocket(t, env, keyAlpha1)
			opened := time.Now()
			for _, input := range []string{"one", "two"} {
				turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"`+input+`","store":false}`)
			}
			turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"warm","store":false,"generate":false}`)
			// Each turn's own line is written as its handler returns; the connection's is not
			// there while the connection is open.
			turnLines := func() int { return strings.Count(env.logs.String(), `"transport":"websocket"`) }
			if !waitFor(10*time.Second, func() bool { return turnLines() >= 3 }) {
				t.Fatalf("%d turn lines logged, want 3:\n%s", turnLines(), env.logs.String())
			}
			if l := socketLines(env); len(l) != 0 {
				t.Fatalf("the connection's line was written while it was open: %s", l[0])
			}
			open := time.Since(opened)
			tc.close(ws)

			var lines []string
			if !waitFor(10*time.Second, func() bool { lines = socketLines(env); return len(lines) > 0 }) {
				t.Fatalf("no line for the connection after it closed:\n%s", env.logs.String())
			}
			line := lines[0]
			if len(lines) != 1 || gjson.Get(line, "status").Int() != 101 || gjson.Get(line, "method").Str != "GET" {
				t.Fatalf("connection lines %q", lines)
			}
			if n := gjson.Get(line, "turns"); !n.Exists() || n.Int() != 2 {
				t.Errorf("turns %s, want 2: %s", n.Raw, line)
			}
			// The server's clock started before the client's dial returned and stopped after
			// the client started to close, so the life logged covers the time the test saw.
			if d := time.Duration(gjson.Get(line, "duration").Int()); d < open {
				t.Errorf("duration %v, want the connection's life, at least %v", d, open)
			}
			if gjson.Get(line, "team").Str != "alpha" {
				t.Errorf("line %s", line)
			}
		})
	}
}

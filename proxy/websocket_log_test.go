package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
)

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

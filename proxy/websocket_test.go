package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d frames: %v", len(got), err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("a frame of type %v", typ)
		}
		got = append(got, string(data))
		switch gjson.GetBytes(data, "type").Str {
		case "response.completed", "response.incomplete", "response.failed", "error":
			return got
		}
	}
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

package tests

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// The Responses WebSocket mode through the real binary, driven by openai-go's own WebSocket
// client (client.Responses.Connect, v3.98.0: the newest openai-go on the Go module proxy;
// the 3.99 the issue names was never published).

// sendTurn sends a response.create of one string input on conn (continuing previous, if
// any); a failed send fails the test.
func sendTurn(t *testing.T, conn *responses.ResponseConnection, model, input, previous string) {
	t.Helper()
	p := responses.ResponsesClientEventResponseCreateParam{
		Model: model, Store: openai.Bool(false),
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String(input)},
	}
	if previous != "" {
		p.PreviousResponseID = openai.String(previous)
	}
	if err := conn.Create(ctx(t), p); err != nil {
		t.Fatal(err)
	}
}

// connectSocket opens a Responses WebSocket to g with the SDK and alpha's key; it closes with
// the test.
func connectSocket(t *testing.T, g *gateway) *responses.ResponseConnection {
	t.Helper()
	client := sdkClient(g, alphaKey)
	conn, err := client.Responses.Connect(ctx(t), responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// One turn, a chain that sends only its new input with store: false, a refused turn and a good
// one after it, all on one connection.
func TestWebSocketGoClient(t *testing.T) {
	p, g := startKeysGateway(t, "")
	conn := connectSocket(t, g)

	sendTurn(t, conn, "sim-chat", "first", "")
	r1, err := conn.FinalResponse(ctx(t))
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	if r1.Status != "completed" || r1.OutputText() != simAnswer("sim-chat", "first") {
		t.Fatalf("first turn: %s %q", r1.Status, r1.OutputText())
	}

	mark := len(p.Sim.Requests())
	sendTurn(t, conn, "sim-chat", "second", r1.ID)
	r2, err := conn.FinalResponse(ctx(t))
	if err != nil {
		t.Fatalf("chained turn: %v", err)
	}
	if got := strings.Join(conversationTexts(t, p, mark), "|"); got != "user:first|assistant:"+simAnswer("sim-chat", "first")+"|user:second" {
		t.Errorf("the chained turn sent the platform %s", got)
	}
	if r2.OutputText() != simAnswer("sim-chat", "second") {
		t.Errorf("chained turn answered %q", r2.OutputText())
	}

	// A chain neither the connection nor the store holds is refused as over HTTP.
	sendTurn(t, conn, "sim-chat", "third", "resp_nowhere")
	_, err = conn.FinalResponse(ctx(t))
	var protoErr *responses.ResponseProtocolError
	if !errors.As(err, &protoErr) {
		t.Fatalf("refused turn: %v, want a protocol error", err)
	}
	raw := gjson.Parse(protoErr.Event.RawJSON())
	if raw.Get("status").Int() != 400 || raw.Get("error.code").Str != "previous_response_not_found" || raw.Get("error.param").Str != "previous_response_id" {
		t.Errorf("refused turn's event %s", raw.Raw)
	}

	sendTurn(t, conn, "sim-chat", "fourth", r2.ID)
	r4, err := conn.FinalResponse(ctx(t))
	if err != nil || r4.Status != "completed" {
		t.Fatalf("turn after the refusal: %v", err)
	}
	// Every turn is an access log line of its own, marked as a WebSocket turn.
	if !waitForOutput(g, 5*time.Second, func(out string) bool { return strings.Count(out, "transport=websocket") >= 4 }) {
		t.Errorf("%d turns logged as WebSocket turns, want 4", strings.Count(g.Output.String(), "transport=websocket"))
	}
	g.assertNoSecret(t, p.Key)
}

// SIGTERM: the turn in flight finishes, then the connection closes with 1012 and the process
// exits cleanly.
func TestWebSocketGoClientDrain(t *testing.T) {
	p, g := startKeysGateway(t, "")
	conn := connectSocket(t, g)
	sendTurn(t, conn, "sim-slow", "take your time", "")
	// The turn is in flight once its first event is here.
	first, err := conn.Recv(ctx(t))
	if err != nil || first.Type != "response.created" {
		t.Fatalf("first event %q: %v", first.Type, err)
	}
	g.Signal(t, syscall.SIGTERM)
	r, err := conn.FinalResponse(ctx(t))
	if err != nil || r.Status != "completed" {
		t.Fatalf("the turn in flight did not finish: %v", err)
	}
	_, err = conn.Recv(ctx(t))
	if code := websocket.CloseStatus(err); code != websocket.StatusServiceRestart {
		t.Errorf("after the turn: %v (close %v), want close 1012", err, code)
	}
	if code := g.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	g.assertNoSecret(t, p.Key)
}

// waitForOutput polls the process output until cond holds or d passes.
func waitForOutput(g *gateway, d time.Duration, cond func(string) bool) bool {
	deadline := time.Now().Add(d)
	for !cond(g.Output.String()) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

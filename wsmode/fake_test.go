package wsmode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
)

// fakeRoute stands in for POST /v1/responses: it answers each turn with a stream whose
// response id and text come from the turn's last input item ("resp_" + its text), writing
// the deltas of words one by one, each handed whole to the turn's writer as the relay hands
// them (Turn.Event). A turn whose text has a gate waits on it before each delta, so a test
// decides when its stream moves on. It reports what it was charged as the proxy does
// (Turn.Settled), and stops at the first event refused, as the relay does.
type fakeRoute struct {
	mu     sync.Mutex
	gates  map[string]chan struct{}
	bodies []string            // bodies received, in order
	status map[string]int      // a turn answered with this status instead of a stream
	calls  map[string][]string // a turn whose reply is function calls (their call ids)
	events chan string         // "start:<text>" and "end:<text>" as turns begin and end
	words  map[string][]string // a turn's deltas; default: its text and "done"
	usage  map[string][2]int64 // reported as settled, by text
	sent   map[string]int      // deltas written, by text
	holds  map[string]chan struct{}
}

func newFakeRoute() *fakeRoute {
	return &fakeRoute{gates: map[string]chan struct{}{}, status: map[string]int{}, calls: map[string][]string{},
		events: make(chan string, 64), words: map[string][]string{}, usage: map[string][2]int64{}, sent: map[string]int{},
		holds: map[string]chan struct{}{}}
}

// holdAfter makes text's turn wait, once its last event is handed over, until the channel is
// closed: the route has answered and not yet returned.
func (f *fakeRoute) holdAfter(text string) chan struct{} { return f.waitOn(f.holds, text) }

// gate makes text's turn wait for a tick before each delta.
func (f *fakeRoute) gate(text string) chan struct{} { return f.waitOn(f.gates, text) }

// waitOn gives text's turn a channel in waits (gates or holds) to wait on.
func (f *fakeRoute) waitOn(waits map[string]chan struct{}, text string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan struct{})
	waits[text] = c
	return c
}

func (f *fakeRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	in := gjson.GetBytes(body, "input")
	text := in.Str
	if in.IsArray() {
		arr := in.Array()
		text = arr[len(arr)-1].Get("content").Str
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	gate, status, calls, words, hold := f.gates[text], f.status[text], f.calls[text], f.words[text], f.holds[text]
	f.mu.Unlock()
	if words == nil {
		words = []string{text, " done"}
	}
	f.events <- "start:" + text
	defer func() { f.events <- "end:" + text }()
	if status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error":{"message":"refused","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		return
	}
	turn := TurnOf(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	id, seq := "resp_"+text, 0
	send := func(ev map[string]any) bool {
		ev["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(ev)
		return turn.Event(ev["type"].(string), b) == nil
	}
	n := 0
	defer func() {
		f.mu.Lock()
		f.sent[text] = n
		u := f.usage[text]
		f.mu.Unlock()
		turn.Settled(Usage{Input: u[0], Output: u[1] + int64(n)})
	}()
	resp := map[string]any{"id": id, "object": "response", "status": "in_progress", "model": "m", "output": []any{}}
	if !send(map[string]any{"type": "response.created", "response": resp}) {
		return
	}
	if len(calls) > 0 {
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		var out []any
		for _, c := range calls {
			out = append(out, map[string]any{"type": "function_call", "id": "fc_" + c, "call_id": c, "name": "tool", "arguments": "{}"})
		}
		resp["status"], resp["output"] = "completed", out
		send(map[string]any{"type": "response.completed", "response": resp})
		return
	}
	msgID := "msg_" + text
	if !send(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{}}}) {
		return
	}
	var all strings.Builder
	for _, word := range words {
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if !send(map[string]any{"type": "response.output_text.delta", "item_id": msgID, "output_index": 0, "content_index": 0, "delta": word}) {
			return
		}
		n++
		all.WriteString(word)
	}
	item := map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": all.String(), "annotations": []any{}}}}
	if !send(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item}) {
		return
	}
	resp["status"], resp["output"] = "completed", []any{item}
	resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": n, "total_tokens": 10 + n}
	send(map[string]any{"type": "response.completed", "response": resp})
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}
}

// body is the i-th body the route received.
func (f *fakeRoute) body(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.bodies) {
		return ""
	}
	return f.bodies[i]
}

// isTurn reports whether w is a turn's writer, as proxy finds it.
func isTurn(w http.ResponseWriter) bool { return TurnOf(w) != nil }

// wait waits for the route's next start or end note, which must be want.
func (f *fakeRoute) wait(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-f.events:
		if got != want {
			t.Fatalf("route: %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("route: no %s within 10s", want)
	}
}

// frames reads frames until done holds for one, returning them all.
func frames(t *testing.T, ws *websocket.Conn, done func(gjson.Result) bool) []gjson.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []gjson.Result
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		ev := gjson.ParseBytes(data)
		out = append(out, ev)
		if done(ev) {
			return out
		}
	}
}

// send writes one message.
func send(t *testing.T, ws *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// isType matches an event of type typ on lane (its stream_id).
func isType(typ, lane string) func(gjson.Result) bool {
	return func(ev gjson.Result) bool { return ev.Get("type").Str == typ && ev.Get("stream_id").Str == lane }
}

// create is a response.create of text on lane ("" the default).
func create(text, lane string) string {
	msg := `{"type":"response.create","model":"m","store":false,"input":` + quote(text)
	if lane != "" {
		msg += `,"stream_id":` + quote(lane)
	}
	return msg + `}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	apitest.WaitFor(t, 10*time.Second, "the condition", cond)
}

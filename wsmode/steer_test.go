package wsmode

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func steerMsg(target, input string) string {
	return `{"type":"response.steer","previous_response_id":` + quote(target) + `,"input":` + input + `}`
}

// A steer of a streaming response is accepted; the response ends incomplete (steered) at the
// next output boundary with what it streamed and what it was charged; its successor runs
// next on the lane with the steering input after the steered response's output; a steer of
// the finished response then fails as too late, and one of an unknown response as unknown.
func TestSteerRunningResponse(t *testing.T) {
	route := newFakeRoute()
	tick := route.gate("long")
	route.words["long"] = []string{"one", " two", " three"}
	route.usage["long"] = [2]int64{10, 0}
	ws := serveOne(t, New(Options{Turns: route}))

	send(t, ws, create("long", "l"))
	frames(t, ws, isType("response.output_item.added", "l"))
	tick <- struct{}{}
	frames(t, ws, isType("response.output_text.delta", "l"))
	send(t, ws, steerMsg("resp_long", `"turn left"`))
	acc := frames(t, ws, isType("response.steer.accepted", "l"))
	a := acc[len(acc)-1]
	steerID := a.Get("steer.id").Str
	if !strings.HasPrefix(steerID, "steer_") || a.Get("steer.previous_response_id").Str != "resp_long" {
		t.Errorf("accepted %s", a.Raw)
	}
	tick <- struct{}{} // the next delta: the boundary where the response stops
	got := frames(t, ws, isType("response.incomplete", "l"))
	inc := got[len(got)-1]
	for _, ev := range got[:len(got)-1] {
		if ev.Get("type").Str == "response.output_text.delta" {
			t.Errorf("a delta after the steer was accepted: %s", ev.Raw)
		}
	}
	r := inc.Get("response")
	if r.Get("id").Str != "resp_long" || r.Get("status").Str != "incomplete" || r.Get("incomplete_details.reason").Str != "steered" {
		t.Errorf("steered response ended with %s", inc.Raw)
	}
	if text := r.Get("output.0.content.0.text").Str; text != "one" || r.Get("output.0.status").Str != "incomplete" {
		t.Errorf("steered output %s, want the one delta streamed", r.Get("output").Raw)
	}
	if r.Get("usage.input_tokens").Int() != 10 || r.Get("usage.output_tokens").Int() != 1 || r.Get("usage.total_tokens").Int() != 11 {
		t.Errorf("steered usage %s, want what was settled (10 in, 1 out)", r.Get("usage").Raw)
	}
	// The successor: created on the same lane, continuing the steered response.
	got = frames(t, ws, isType("response.completed", "l"))
	if got[0].Get("type").Str != "response.created" || got[0].Get("response.id").Str != "resp_turn left" {
		t.Errorf("the successor began with %s", got[0].Raw)
	}
	succ := gjson.Parse(route.body(1))
	var items []string
	for _, it := range succ.Get("input").Array() {
		items = append(items, it.Get("role").Str+":"+it.Get("content").Str+it.Get("content.0.text").Str)
	}
	if strings.Join(items, "|") != "user:long|assistant:one|user:turn left" || succ.Get("previous_response_id").Exists() ||
		succ.Get("model").Str != "m" || succ.Get("store").Type != gjson.False {
		t.Errorf("the successor was sent %s (items %q)", succ.Raw, items)
	}

	// Too late, and unknown.
	send(t, ws, steerMsg("resp_long", `"again"`))
	f := frames(t, ws, isType("response.steer.failed", ""))[0]
	if f.Get("error.code").Str != codeAlreadyCompleted || f.Get("steer.input").Str != "again" || f.Get("steer.id").Exists() {
		t.Errorf("a steer of a finished response got %s", f.Raw)
	}
	send(t, ws, steerMsg("resp_nope", `[{"role":"user","content":"x"}]`))
	f = frames(t, ws, isType("response.steer.failed", ""))[0]
	if f.Get("error.code").Str != codeNotFound || f.Get("steer.previous_response_id").Str != "resp_nope" {
		t.Errorf("a steer of an unknown response got %s", f.Raw)
	}
}

// Steers beyond maxSteers on one response fail; those accepted go into one successor in the
// order they were accepted.
func TestSteerCapAndOrder(t *testing.T) {
	route := newFakeRoute()
	tick := route.gate("long")
	ws := serveOne(t, New(Options{Turns: route}))
	send(t, ws, create("long", ""))
	frames(t, ws, isType("response.output_item.added", ""))
	for i := range maxSteers + 1 {
		send(t, ws, steerMsg("resp_long", quote(string(rune('a'+i)))))
	}
	evs := frames(t, ws, isType("response.steer.failed", ""))
	if len(evs) != maxSteers+1 || evs[maxSteers].Get("error.code").Str != codeTooManySteers {
		t.Fatalf("%d events, last %s", len(evs), evs[len(evs)-1].Raw)
	}
	tick <- struct{}{}
	frames(t, ws, isType("response.incomplete", ""))
	frames(t, ws, isType("response.completed", ""))
	var texts []string
	for _, it := range gjson.Parse(route.body(1)).Get("input").Array()[1:] {
		texts = append(texts, it.Get("content").Str)
	}
	if strings.Join(texts, "") != "abcdefgh" {
		t.Errorf("successor input %q", texts)
	}
}

// A response that stops for the client's tool results keeps the steering input pending:
// response.steer.pending names the results wanted, and the client's next create continuing it
// on the lane gets the input first, committed by its response.created.
func TestSteerPendingForToolResults(t *testing.T) {
	route := newFakeRoute()
	route.calls["tools"] = []string{"call_1"}
	tick := route.gate("tools")
	ws := serveOne(t, New(Options{Turns: route}))
	send(t, ws, create("tools", "t"))
	route.wait(t, "start:tools")
	frames(t, ws, isType("response.created", "t"))
	send(t, ws, steerMsg("resp_tools", `"also check the weather"`))
	frames(t, ws, isType("response.steer.accepted", "t"))
	tick <- struct{}{}
	got := frames(t, ws, isType("response.steer.pending", "t"))
	p := got[len(got)-1]
	if got[len(got)-2].Get("type").Str != "response.completed" || p.Get("reason").Str != reasonRequiredInput ||
		p.Get("required_input.0.type").Str != "function_call_output" || p.Get("required_input.0.call_id").Str != "call_1" {
		t.Errorf("pending: %s after %s", p.Raw, got[len(got)-2].Raw)
	}
	send(t, ws, `{"type":"response.create","model":"m","store":false,"stream_id":"t","previous_response_id":"resp_tools","input":[{"type":"function_call_output","call_id":"call_1","output":"sunny"},{"role":"user","content":"next"}]}`)
	frames(t, ws, isType("response.completed", "t"))
	in := gjson.Parse(route.body(1)).Get("input").Array()
	var kinds []string
	for _, it := range in {
		kinds = append(kinds, it.Get("type").Str+it.Get("role").Str+":"+it.Get("content").Str)
	}
	// The chain (the first input, the call), then the steering input, then the client's own.
	want := "user:tools|function_call:|user:also check the weather|function_call_output:|user:next"
	if strings.Join(kinds, "|") != want {
		t.Errorf("continuation input %q, want %q", kinds, want)
	}
}

// A successor the route refuses never creates its response: the steering input comes back in
// response.steer.failed with its steer id.
func TestSteerSuccessorRefused(t *testing.T) {
	route := newFakeRoute()
	tick := route.gate("long")
	route.status["go"] = http.StatusTooManyRequests
	ws := serveOne(t, New(Options{Turns: route}))
	send(t, ws, create("long", "z"))
	frames(t, ws, isType("response.output_item.added", "z"))
	send(t, ws, steerMsg("resp_long", `"go"`))
	id := frames(t, ws, isType("response.steer.accepted", "z"))[0].Get("steer.id").Str
	tick <- struct{}{}
	frames(t, ws, isType("response.incomplete", "z"))
	got := frames(t, ws, isType("response.steer.failed", "z"))
	f := got[len(got)-1]
	if got[0].Get("type").Str != "error" || got[0].Get("status").Int() != 429 || got[0].Get("stream_id").Str != "z" {
		t.Errorf("the refused successor's answer: %s", got[0].Raw)
	}
	if f.Get("error.code").Str != codeSuccessorFailed || f.Get("steer.id").Str != id || f.Get("steer.input").Str != "go" {
		t.Errorf("failed: %s", f.Raw)
	}
}

func TestParseSteer(t *testing.T) {
	cases := []struct {
		name, msg string
		ok        bool
		items     string
	}{
		{"string", steerMsg("r", `"hi"`), true, `[{"role":"user","content":"hi"}]`},
		{"messages", steerMsg("r", `[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]}]`), true, ""},
		{"id and status", steerMsg("r", `[{"role":"user","content":"a","id":"m1","status":null}]`), true, ""},
		{"empty string", steerMsg("r", `""`), false, ""},
		{"empty array", steerMsg("r", `[]`), false, ""},
		{"no input", `{"type":"response.steer","previous_response_id":"r"}`, false, ""},
		{"number", steerMsg("r", `3`), false, ""},
		{"assistant", steerMsg("r", `[{"role":"assistant","content":"a"}]`), false, ""},
		{"no role", steerMsg("r", `[{"content":"a"}]`), false, ""},
		{"no content", steerMsg("r", `[{"role":"user"}]`), false, ""},
		{"tool output", steerMsg("r", `[{"type":"function_call_output","call_id":"c","output":"x"}]`), false, ""},
		{"other part", steerMsg("r", `[{"role":"user","content":[{"type":"output_text","text":"a"}]}]`), false, ""},
		{"extra field", steerMsg("r", `[{"role":"user","content":"a","name":"x"}]`), false, ""},
		{"not an object", steerMsg("r", `["a"]`), false, ""},
		{"no target", `{"type":"response.steer","input":"a"}`, false, ""},
		{"empty target", steerMsg("", `"a"`), false, ""},
		{"long target", steerMsg(strings.Repeat("r", maxSteerTarget+1), `"a"`), false, ""},
		{"stream_id", `{"type":"response.steer","previous_response_id":"r","input":"a","stream_id":"l"}`, false, ""},
		{"other field", `{"type":"response.steer","previous_response_id":"r","input":"a","model":"m"}`, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, answer := parseClientMessage([]byte(c.msg))
			if !c.ok {
				ev := gjson.ParseBytes(answer)
				if ev.Get("type").Str != steerFailedEventType || ev.Get("error.code").Str != codeInvalidInput || ev.Get("error.message").Str == "" {
					t.Errorf("answered %s", answer)
				}
				return
			}
			if answer != nil || msg.kind != msgSteer || msg.steer.target != "r" {
				t.Fatalf("answered %s, message %+v", answer, msg)
			}
			if c.items != "" && string(msg.steer.items) != c.items {
				t.Errorf("items %s, want %s", msg.steer.items, c.items)
			}
		})
	}
}

// FuzzParseSteer: any steer is either taken, with a target and an array of user messages,
// or answered with one response.steer.failed event.
func FuzzParseSteer(f *testing.F) {
	for _, s := range []string{
		steerMsg("r", `"hi"`), steerMsg("r", `[{"role":"user","content":"x"}]`), steerMsg("r", `[{"role":"user","content":[{"type":"input_text"}]}]`),
		steerMsg("", `[]`), `{"type":"response.steer","input":{"role":"user"}}`, `{"type":"response.steer","stream_id":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, answer := parseClientMessage(data)
		if msg.kind != msgSteer {
			return
		}
		if answer != nil || msg.steer.target == "" {
			t.Fatalf("steer %+v with answer %s", msg.steer, answer)
		}
		items := gjson.ParseBytes(msg.steer.items)
		if !gjson.ValidBytes(msg.steer.items) || !items.IsArray() || len(items.Array()) == 0 {
			t.Fatalf("items %s", msg.steer.items)
		}
		for _, it := range items.Array() {
			if it.Get("role").Str != "user" || !it.Get("content").Exists() {
				t.Fatalf("item %s", it.Raw)
			}
		}
	})
}

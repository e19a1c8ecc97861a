package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/config"
)

// Chains over the Responses WebSocket: the client sends only its new items and
// previous_response_id; the platform, stateless as far as modelgate knows, gets the whole
// conversation every turn.

// lastEvent is a turn's last frame, checked to be a completed response; it returns the
// response.
func completedResponse(t *testing.T, events []string) gjson.Result {
	t.Helper()
	last := events[len(events)-1]
	if gjson.Get(last, "type").Str != "response.completed" {
		t.Fatalf("turn ended with %s", last)
	}
	return gjson.Get(last, "response")
}

// upstreamInputs are the kinds (role or type) of the input items of the platform's n-th call.
func upstreamInputs(t *testing.T, env *testEnv, n int) []string {
	t.Helper()
	reqs := env.sim.Requests()
	if len(reqs) <= n {
		t.Fatalf("the platform received %d calls, want a %d-th", len(reqs), n+1)
	}
	body := gjson.ParseBytes(reqs[n].Body)
	if body.Get("previous_response_id").Exists() {
		t.Errorf("call %d: previous_response_id reached the platform", n)
	}
	var kinds []string
	for _, it := range body.Get("input").Array() {
		k := it.Get("type").Str
		if k == "" || k == "message" {
			k = it.Get("role").Str
		}
		kinds = append(kinds, k)
	}
	return kinds
}

const weatherTool = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`

// A three-turn tool loop with store: false: each turn after the first sends only its new items;
// the platform gets the whole expanded input each time; nothing is kept in the store.
func TestSocketToolLoopStoreFalse(t *testing.T) {
	env := storedEnv(t, nil, nil)
	ws := dialSocket(t, env, keyAlpha1)

	r1 := completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-tools","store":false,`+weatherTool+
		`,"input":[{"role":"user","content":"weather in Paris?"}]}`))
	call := r1.Get(`output.#(type=="function_call")`)
	if call.Get("call_id").Str == "" {
		t.Fatalf("turn 1 called no tool: %s", r1.Raw)
	}
	r2 := completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-tools","store":false,`+weatherTool+
		`,"previous_response_id":"`+r1.Get("id").Str+`","input":[{"type":"function_call_output","call_id":"`+call.Get("call_id").Str+`","output":"sunny"}]}`))
	if !strings.Contains(r2.Get("output.0.content.0.text").Str, "sunny") {
		t.Errorf("turn 2 did not answer with the tool's output: %s", r2.Raw)
	}
	r3 := completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-tools","store":false,"tool_choice":"none",`+weatherTool+
		`,"previous_response_id":"`+r2.Get("id").Str+`","input":[{"role":"user","content":"thanks"}]}`))

	want := [][]string{
		{"user"},
		{"user", "function_call", "function_call_output"},
		{"user", "function_call", "function_call_output", "assistant", "user"},
	}
	for i, w := range want {
		if got := upstreamInputs(t, env, i); strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("platform call %d got input %v, want %v", i+1, got, w)
		}
	}
	// The expanded items are the platform's own: the call as it made it.
	if got := gjson.GetBytes(env.sim.Requests()[2].Body, "input.1.call_id").Str; got != call.Get("call_id").Str {
		t.Errorf("turn 3 sent call_id %q, want %q", got, call.Get("call_id").Str)
	}
	for _, r := range []gjson.Result{r1, r2, r3} {
		if status, _, _ := env.do(t, http.MethodGet, "/v1/responses/"+r.Get("id").Str, keyAlpha1, nil); status != http.StatusNotFound {
			t.Errorf("store:false response %s was kept (GET %d)", r.Get("id").Str, status)
		}
	}
}

// With store: false, a fork of a response no longer held is previous_response_not_found, as
// an error event; the connection goes on.
func TestSocketForkStoreFalseNotFound(t *testing.T) {
	env := storedEnv(t, nil, nil)
	ws := dialSocket(t, env, keyAlpha1)
	r1 := completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"a","store":false}`))
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"b","store":false,"previous_response_id":"`+r1.Get("id").Str+`"}`))
	calls := env.upstreamCalls()
	ev := turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"c","store":false,"previous_response_id":"`+r1.Get("id").Str+`"}`)
	e := gjson.Parse(ev[len(ev)-1])
	if e.Get("type").Str != "error" || e.Get("status").Int() != 400 || e.Get("error.code").Str != "previous_response_not_found" || e.Get("error.param").Str != "previous_response_id" {
		t.Errorf("fork of a forgotten response: %s", ev[len(ev)-1])
	}
	if env.upstreamCalls() != calls {
		t.Error("the refused fork reached the platform")
	}
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"again","store":false}`))
}

// generate: false prepares a chain without the platform; the next turn sends the prepared
// items with its own.
func TestSocketPreparedChain(t *testing.T) {
	env := newTestEnv(t, "", nil)
	ws := dialSocket(t, env, keyAlpha1)
	ev := turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","store":false,"generate":false,"input":[{"role":"developer","content":"be terse"}]}`)
	prep := completedResponse(t, ev)
	if len(ev) != 2 || prep.Get("output").Raw != "[]" || env.upstreamCalls() != 0 {
		t.Fatalf("prepare: %d events, %s, %d platform calls", len(ev), prep.Raw, env.upstreamCalls())
	}
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","store":false,"previous_response_id":"`+prep.Get("id").Str+`","input":[{"role":"user","content":"hi"}]}`))
	if got := upstreamInputs(t, env, 0); strings.Join(got, ",") != "developer,user" {
		t.Errorf("the turn after a prepare sent %v", got)
	}
}

// With store: true, a chain reaching back past what the connection holds (a response of
// another connection, of HTTP, or a fork of an earlier turn) expands from the stored
// responses as on HTTP.
func TestSocketChainFromStore(t *testing.T) {
	env := storedEnv(t, nil, nil)
	overHTTP := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"one"}`)

	ws := dialSocket(t, env, keyAlpha1)
	r2 := completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"two","previous_response_id":"`+overHTTP+`"}`))
	if got := upstreamInputs(t, env, 1); strings.Join(got, ",") != "user,assistant,user" {
		t.Errorf("a continuation of an HTTP response sent %v", got)
	}
	r3 := completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"three","previous_response_id":"`+r2.Get("id").Str+`"}`))
	if got := upstreamInputs(t, env, 2); len(got) != 5 {
		t.Errorf("the third turn sent %v", got)
	}
	// A fork of r2, no longer the chain's last on this connection: from the store.
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"fork","previous_response_id":"`+r2.Get("id").Str+`"}`))
	if got := upstreamInputs(t, env, 3); len(got) != 5 {
		t.Errorf("the fork sent %v", got)
	}
	// Another connection continues r3 from the store.
	other := dialSocket(t, env, keyAlpha2)
	completedResponse(t, turnEvents(t, other, `{"type":"response.create","model":"sim-chat","input":"four","previous_response_id":"`+r3.Get("id").Str+`"}`))
	if got := upstreamInputs(t, env, 4); len(got) != 7 {
		t.Errorf("a new connection's continuation sent %v", got)
	}
	// Another team's key cannot continue it.
	beta := dialSocket(t, env, keyBeta)
	ev := turnEvents(t, beta, `{"type":"response.create","model":"sim-chat","input":"five","previous_response_id":"`+r3.Get("id").Str+`"}`)
	if e := gjson.Parse(ev[len(ev)-1]); e.Get("error.code").Str != "previous_response_not_found" || e.Get("status").Int() != 400 {
		t.Errorf("another team continued the chain: %s", ev[len(ev)-1])
	}
}

// With responses.store: off a previous_response_id the connection does not hold is the
// platform's: the turn goes with it, and so does the next one, by id, rather than with a
// chain that starts in the middle of the conversation.
func TestSocketPlatformChainStoreOff(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Responses.Store = "off" })
	ws := dialSocket(t, env, keyAlpha1)
	r1 := completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"a","previous_response_id":"resp_on_the_platform"}`))
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"b","previous_response_id":"`+r1.Get("id").Str+`"}`))
	reqs := env.sim.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d platform calls", len(reqs))
	}
	for i, want := range [][2]string{{"resp_on_the_platform", "a"}, {r1.Get("id").Str, "b"}} {
		body := gjson.ParseBytes(reqs[i].Body)
		if got := body.Get("previous_response_id").Str; got != want[0] || body.Get("input").Raw != `"`+want[1]+`"` {
			t.Errorf("call %d: previous_response_id %q and input %s, want %q and %q", i+1, got, body.Get("input").Raw, want[0], want[1])
		}
	}
}

// completedID is the response id of a turn's response.completed event.
func completedID(t *testing.T, events []string) string {
	t.Helper()
	last := events[len(events)-1]
	if gjson.Get(last, "type").Str != "response.completed" {
		t.Fatalf("the turn ended with %s", last)
	}
	return gjson.Get(last, "response.id").Str
}

// upstreamTurns is the latest platform request's input as role:text items.
func upstreamTurns(t *testing.T, env *testEnv) string {
	t.Helper()
	var got []string
	for _, it := range lastUpstreamInput(t, env).Get("input").Array() {
		text := it.Get("content.0.text").Str
		if it.Get("content").Type == gjson.String {
			text = it.Get("content").Str
		}
		got = append(got, it.Get("role").Str+":"+text)
	}
	return strings.Join(got, "|")
}

// A WebSocket turn that modelgate keeps (store not false) and that continues a kept response
// is kept as HTTP keeps it: linked to its parent, with its own input only. Expanded on the
// connection, it was kept as a copy of the whole conversation with no parent: retrieved, it
// named no previous_response_id, listed every earlier item as its own, and each turn of a
// long session stored the conversation again.
func TestSocketKeptChainLinksItsParent(t *testing.T) {
	env := storedEnv(t, nil, nil)
	ws := dialSocket(t, env, keyAlpha1)
	create := func(fields string) string {
		return completedID(t, turnEvents(t, ws, `{"type":"response.create","model":"gpt-4o-mini",`+fields+`}`))
	}
	r1 := create(`"input":"one"`)
	r2 := create(`"input":"two","previous_response_id":"` + r1 + `"`)
	if got, want := upstreamTurns(t, env), "user:one|assistant:Hello from sim-chat. You said: one|user:two"; got != want {
		t.Fatalf("the platform got %q, want %q", got, want)
	}
	status, _, body := env.do(t, "GET", "/v1/responses/"+r2, keyAlpha1, nil)
	if status != 200 || gjson.GetBytes(body, "previous_response_id").Str != r1 {
		t.Errorf("GET %s: %d previous_response_id %s", r2, status, gjson.GetBytes(body, "previous_response_id").Raw)
	}
	status, _, body = env.do(t, "GET", "/v1/responses/"+r2+"/input_items", keyAlpha1, nil)
	if items := gjson.GetBytes(body, "data").Array(); status != 200 || len(items) != 1 || !strings.Contains(items[0].Get("content").Raw, `"two"`) {
		t.Errorf("GET %s/input_items: %d %s; want the turn's own item only", r2, status, body)
	}

	// The connection still holds the whole conversation: a store: false turn continuing it is
	// expanded here.
	create(`"input":"three","store":false,"previous_response_id":"` + r2 + `"`)
	want := "user:one|assistant:Hello from sim-chat. You said: one|user:two|assistant:Hello from sim-chat. You said: two|user:three"
	if got := upstreamTurns(t, env); got != want {
		t.Errorf("the platform got %q, want %q", got, want)
	}

	// A chain begun with store: false and continued by a kept turn: the parent was never kept,
	// so the turn is expanded on the connection and kept whole; HTTP can continue it.
	r4 := create(`"input":"four","store":false`)
	r5 := create(`"input":"five","previous_response_id":"` + r4 + `"`)
	status, _, body = env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"gpt-4o-mini","input":"six","previous_response_id":"`+r5+`"}`))
	want = "user:four|assistant:Hello from sim-chat. You said: four|user:five|assistant:Hello from sim-chat. You said: five|user:six"
	if status != 200 || upstreamTurns(t, env) != want {
		t.Errorf("HTTP continuing %s: %d %s; the platform got %q", r5, status, body, upstreamTurns(t, env))
	}
}

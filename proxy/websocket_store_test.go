package proxy

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

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

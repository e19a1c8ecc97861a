package stored

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestTurnInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"hi \"there\""`, `[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi \"there\""}]}]`},
		{` [{"role":"user","content":"x"}] `, `[{"role":"user","content":"x"}]`},
		{`[]`, `[]`},
	} {
		got, err := TurnInput(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("TurnInput(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := TurnInput(`{"a":1}`); err == nil {
		t.Error("an object input was accepted")
	}
}

func TestExpandedInput(t *testing.T) {
	chain := []*Record{
		{Input: []byte(`[{"n":1}]`), Output: []byte(`[{"n":2},{"type":"reasoning","encrypted_content":"e"}]`)},
		{Input: []byte(`[]`), Response: []byte(`{"id":"r","output": [ {"n":3} ] }`)},
		{Input: nil, Output: nil}, // a turn with nothing kept adds nothing
	}
	for _, tc := range []struct{ turn, want string }{
		{`[{"n":4}]`, `[{"n":1},{"n":2},{"type":"reasoning","encrypted_content":"e"},{"n":3},{"n":4}]`},
		{`[]`, `[{"n":1},{"n":2},{"type":"reasoning","encrypted_content":"e"},{"n":3}]`},
	} {
		got := ExpandedInput(chain, []byte(tc.turn))
		if string(got) != tc.want {
			t.Errorf("ExpandedInput(..., %s)\n got %s\nwant %s", tc.turn, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("not JSON: %s", got)
		}
	}
	if got := ExpandedInput(nil, []byte(`[{"n":1}]`)); string(got) != `[{"n":1}]` {
		t.Errorf("no chain: %s", got)
	}
}

func TestResponseObjectAndOutputItems(t *testing.T) {
	resp := `{"id":"resp_2","object":"response","status":"completed","previous_response_id":null,"output":[{"type":"message","id":"m"}],"usage":{"input_tokens":3}}`
	r := &Record{ID: "resp_2", Parent: "resp_1", Status: StatusCompleted, Response: []byte(resp)}
	if got := string(r.OutputItems()); got != `[{"type":"message","id":"m"}]` {
		t.Errorf("OutputItems = %s", got)
	}
	obj, err := ResponseObject(r)
	if err != nil {
		t.Fatal(err)
	}
	o := gjson.ParseBytes(obj)
	if o.Get("previous_response_id").Str != "resp_1" || o.Get("output.0.id").Str != "m" || o.Get("usage.input_tokens").Int() != 3 {
		t.Errorf("ResponseObject: %s", obj)
	}
	if string(r.Response) != resp {
		t.Errorf("ResponseObject changed the record: %s", r.Response)
	}
	// Output kept apart wins over the object's.
	r.Output = []byte(`[{"type":"message","id":"apart"}]`)
	if obj, _ := ResponseObject(r); gjson.GetBytes(obj, "output.0.id").Str != "apart" || string(r.OutputItems()) != string(r.Output) {
		t.Errorf("Output apart: %s", obj)
	}
	// A record with no object yet (queued in the background) still answers a response.
	obj, err = ResponseObject(&Record{ID: "resp_q", Status: StatusQueued, Model: "m", CreatedAt: 5})
	if err != nil || !json.Valid(obj) || gjson.GetBytes(obj, "status").Str != "queued" || gjson.GetBytes(obj, "output").Raw != "[]" {
		t.Errorf("queued: %s %v", obj, err)
	}
	// The record's status wins over the object's.
	obj, _ = ResponseObject(&Record{ID: "resp_2", Status: StatusCancelled, Response: []byte(`{"id":"resp_2","status":"in_progress"}`)})
	if gjson.GetBytes(obj, "status").Str != StatusCancelled {
		t.Errorf("status: %s", obj)
	}
	if (&Record{Response: []byte(`{"output":null}`)}).OutputItems() != nil {
		t.Error("a null output has items")
	}
}

func TestInputItemsHaveIDsAndTypes(t *testing.T) {
	items := InputItems(&Record{ID: "resp_7", Input: []byte(`[{"role":"user","content":"a"},{"type":"message","id":"msg_own","role":"user","content":"b"},{"type":"function_call_output","call_id":"c","output":"o"}]`)})
	want := []string{
		`{"role":"user","content":"a","id":"msg_resp_7_0","type":"message"}`,
		`{"type":"message","id":"msg_own","role":"user","content":"b"}`,
		`{"type":"function_call_output","call_id":"c","output":"o","id":"msg_resp_7_2"}`,
	}
	if len(items) != len(want) {
		t.Fatalf("%d items", len(items))
	}
	for i := range want {
		if string(items[i]) != want[i] {
			t.Errorf("item %d: %s, want %s", i, items[i], want[i])
		}
	}
}

// BenchmarkExpandChain100 continues a 100-turn conversation kept in the embedded store:
// the walk of the chain (one read and decode per turn) and the expanded input built from it.
func BenchmarkExpandChain100(b *testing.B) {
	ctx := context.Background()
	k := newKeeper(b, boltStore(b, nil), time.Hour, 0, nil, true)
	parent := ""
	for i := range 100 {
		id := fmt.Sprintf("resp_%06d", i)
		resp := fmt.Sprintf(`{"id":%q,"object":"response","created_at":1795678887,"status":"completed","model":"m","output":[{"type":"message","id":"msg_%d","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":%q}]}],"usage":{"input_tokens":100,"output_tokens":80,"total_tokens":180}}`,
			id, i, strings.Repeat("answer ", 60))
		input := []byte(fmt.Sprintf(`[{"type":"message","role":"user","content":[{"type":"input_text","text":%q}]}]`, strings.Repeat("question ", 20)))
		if err := k.KeepResponse(ctx, "team:bench", Turn{Parent: parent, Model: "m", Input: input}, []byte(resp)); err != nil {
			b.Fatal(err)
		}
		parent = id
	}
	k.Flush()
	turn := []byte(`[{"type":"message","role":"user","content":"next"}]`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		chain, err := k.Chain(ctx, "team:bench", parent, 0)
		if err != nil || len(chain) != 100 {
			b.Fatal(len(chain), err)
		}
		if in := ExpandedInput(chain, turn); len(in) < 100*500 {
			b.Fatal(len(in))
		}
	}
}

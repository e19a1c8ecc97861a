package wsmode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// answered is a terminal event's response object: its id and output items.
func answered(id, output string) gjson.Result {
	return gjson.Parse(`{"id":"` + id + `","output":` + output + `}`)
}

// turnOf expands body on c and remembers the answer, as a served turn does; it returns the
// body sent.
func turnOf(t *testing.T, c *chains, body, id, output string) string {
	t.Helper()
	out, input, continued, err := c.expand([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	c.remember(continued, input, answered(id, output), false)
	return string(out)
}

func TestChainsExpand(t *testing.T) {
	const (
		out1 = `[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"one"}]}]`
		call = `[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]`
	)
	cases := []struct {
		name string
		// turns before the one checked: body, response id, its output.
		before [][3]string
		body   string
		// want is the checked turn's input as sent ("" = the body goes unchanged).
		want string
	}{
		{name: "no previous", body: `{"model":"m","input":"hi"}`},
		{name: "string input after a string turn",
			before: [][3]string{{`{"model":"m","input":"hi"}`, "r1", out1}},
			body:   `{"model":"m","input":"more","previous_response_id":"r1"}`,
			want:   `[{"role":"user","content":"hi"},` + out1[1:len(out1)-1] + `,{"role":"user","content":"more"}]`},
		{name: "tool output after a call",
			before: [][3]string{{`{"model":"m","input":[{"role":"user","content":"go"}]}`, "r1", call}},
			body:   `{"model":"m","input":[{"type":"function_call_output","call_id":"c1","output":"42"}],"previous_response_id":"r1"}`,
			want:   `[{"role":"user","content":"go"},` + call[1:len(call)-1] + `,{"type":"function_call_output","call_id":"c1","output":"42"}]`},
		{name: "empty input continues", // the Codex CLI may send input: [] with previous_response_id
			before: [][3]string{{`{"model":"m","input":"hi"}`, "r1", `[]`}},
			body:   `{"model":"m","input":[],"previous_response_id":"r1"}`,
			want:   `[{"role":"user","content":"hi"}]`},
		{name: "no input continues",
			before: [][3]string{{`{"model":"m","input":"hi"}`, "r1", `[]`}},
			body:   `{"model":"m","previous_response_id":"r1"}`,
			want:   `[{"role":"user","content":"hi"}]`},
		{name: "unknown id left to the route", body: `{"model":"m","input":"x","previous_response_id":"r9"}`},
		{name: "null id", body: `{"model":"m","input":"x","previous_response_id":null}`},
		{name: "id not a string", body: `{"model":"m","input":"x","previous_response_id":1}`},
		{name: "a fork of a response no longer last is left to the route",
			before: [][3]string{
				{`{"model":"m","input":"a"}`, "r1", `[]`},
				{`{"model":"m","input":"b","previous_response_id":"r1"}`, "r2", `[]`}},
			body: `{"model":"m","input":"fork","previous_response_id":"r1"}`},
		{name: "three turns",
			before: [][3]string{
				{`{"model":"m","input":"a"}`, "r1", `[{"k":1}]`},
				{`{"model":"m","input":"b","previous_response_id":"r1"}`, "r2", `[{"k":2}]`}},
			body: `{"model":"m","input":"c","previous_response_id":"r2"}`,
			want: `[{"role":"user","content":"a"},{"k":1},{"role":"user","content":"b"},{"k":2},{"role":"user","content":"c"}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch := newChains()
			for _, b := range c.before {
				turnOf(t, ch, b[0], b[1], b[2])
			}
			out, _, continued, err := ch.expand([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if string(out) != c.body || continued != "" {
					t.Fatalf("changed to %s (continued %q)", out, continued)
				}
				return
			}
			if got := gjson.GetBytes(out, "input").Raw; got != c.want {
				t.Errorf("input\n got %s\nwant %s", got, c.want)
			}
			if gjson.GetBytes(out, "previous_response_id").Exists() {
				t.Errorf("previous_response_id still sent: %s", out)
			}
			if gjson.GetBytes(out, "model").Str != "m" {
				t.Errorf("other fields lost: %s", out)
			}
		})
	}
}

// Only a chain's last response is held: continuing forgets the one continued.
func TestChainsRememberForget(t *testing.T) {
	ch := newChains()
	turnOf(t, ch, `{"input":"a"}`, "r1", `[]`)
	turnOf(t, ch, `{"input":"b","previous_response_id":"r1"}`, "r2", `[]`)
	if _, held := ch.links["r1"]; held || len(ch.order) != 1 || ch.order[0] != "r2" {
		t.Fatalf("held %v", ch.order)
	}
	if want := len(ch.links["r2"].items); ch.size != want {
		t.Errorf("size %d, want %d", ch.size, want)
	}
	ch.forget("r2")
	ch.forget("r2") // twice is harmless
	if ch.size != 0 || len(ch.links) != 0 || len(ch.order) != 0 {
		t.Errorf("after forget: size %d, %d links, order %v", ch.size, len(ch.links), ch.order)
	}
	// A response without an id is not held, and the one it continued is gone still.
	turnOf(t, ch, `{"input":"a"}`, "r3", `[]`)
	out, input, continued, _ := ch.expand([]byte(`{"input":"b","previous_response_id":"r3"}`))
	ch.remember(continued, input, gjson.Parse(`{"output":[]}`), false)
	if len(ch.links) != 0 || ch.size != 0 || !strings.Contains(string(out), `"a"`) {
		t.Errorf("links %v size %d", ch.order, ch.size)
	}
}

// A connection holds at most maxChains chains and maxBytes of items, the oldest dropped first;
// a chain larger than the whole room is not held at all. (Four chains of about 330 bytes in a
// room of 1000: three fit.)
func TestChainsBounds(t *testing.T) {
	ch := newChains()
	for i := range maxChains + 3 {
		turnOf(t, ch, `{"input":"x"}`, fmt.Sprintf("r%d", i), `[]`)
	}
	if len(ch.links) != maxChains || ch.order[0] != "r3" {
		t.Fatalf("%d chains held, oldest %s; want %d, r3", len(ch.links), ch.order[0], maxChains)
	}

	ch = &chains{maxBytes: 1000}
	item := `[{"t":"` + strings.Repeat("y", 290) + `"}]` // a chain of about 330 bytes
	for i := range 4 {
		turnOf(t, ch, `{"input":"x"}`, fmt.Sprintf("r%d", i), item)
	}
	if ch.size > ch.maxBytes || len(ch.links) != 3 || ch.order[0] != "r1" {
		t.Fatalf("size %d of %d, held %v", ch.size, ch.maxBytes, ch.order)
	}
	total := 0
	for _, l := range ch.links {
		total += len(l.items)
	}
	if total != ch.size {
		t.Errorf("size %d, items %d", ch.size, total)
	}

	// Continuing r3 with a turn too large for the room: r3 is forgotten, nothing new held.
	before := len(ch.links)
	huge := `[{"t":"` + strings.Repeat("z", 1200) + `"}]`
	turnOf(t, ch, `{"input":"x","previous_response_id":"r3"}`, "r4", huge)
	if _, held := ch.links["r3"]; held {
		t.Error("the continued response is still held")
	}
	if _, held := ch.links["r4"]; held || len(ch.links) != before-1 {
		t.Errorf("held %v", ch.order)
	}
}

// The 16 MiB default room holds what its 16 chains can carry: each chain is bounded by the
// message limit, and the room by the sum, so a connection's memory of chains stays bounded.
func TestChainsDefaultRoom(t *testing.T) {
	ch := newChains()
	big := `[{"t":"` + strings.Repeat("w", 3<<20) + `"}]`
	for i := range 8 {
		turnOf(t, ch, `{"input":"x"}`, fmt.Sprintf("r%d", i), big)
	}
	if ch.size > maxChainsBytes || len(ch.links) != 5 {
		t.Errorf("%d chains, %d bytes held; want 5 within %d", len(ch.links), ch.size, maxChainsBytes)
	}
}

func TestJoinArrays(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{`[]`, `[]`, `[]`},
		{`[1]`, `[]`, `[1]`},
		{`[]`, `[2]`, `[2]`},
		{"[ 1 , 2 ]", "[\n3\n]", `[1 , 2,3]`},
		{" [ 1 , 2 ] \n", "\t[3] ", `[1 , 2,3]`}, // a whole document's raw keeps its trailing space
		{``, `[1]`, `[1]`},
		{`{"a":1}`, `[1]`, `[1]`},
	} {
		if got := string(joinArrays([]byte(c.a), []byte(c.b))); got != c.want {
			t.Errorf("join(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

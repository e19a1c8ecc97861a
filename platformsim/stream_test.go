package platformsim

import (
	"bytes"
	"testing"
)

// TestScriptedEventFraming checks the bytes a scripted stream puts on the wire: every line
// break a client's SSE reader would honour (LF, CRLF, a lone CR) starts a new data line, so
// what the client reads is the Data that was scripted; a Type that cannot be one line ends
// the stream rather than going out as a broken frame.
func TestScriptedEventFraming(t *testing.T) {
	tests := []struct {
		name   string
		events []Event
		want   string
	}{
		{"typed", []Event{{Type: "a", Data: "1"}}, "event: a\ndata: 1\n\n"},
		{"untyped", []Event{{Data: `{"x":1}`}}, "data: {\"x\":1}\n\n"},
		{"lf lines", []Event{{Data: "one\ntwo"}}, "data: one\ndata: two\n\n"},
		{"blank line inside", []Event{{Data: "one\n\ntwo"}}, "data: one\ndata: \ndata: two\n\n"},
		{"crlf lines", []Event{{Data: "one\r\ntwo"}}, "data: one\ndata: two\n\n"},
		{"lone cr", []Event{{Data: "one\rtwo"}}, "data: one\ndata: two\n\n"},
		{"several", []Event{{Type: "a", Data: "1"}, {Type: "b", Data: "2"}}, "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n"},
		{"type with a line break ends the stream", []Event{{Type: "a", Data: "1"}, {Type: "b\nc", Data: "2"}, {Type: "d", Data: "3"}}, "event: a\ndata: 1\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, srv := newSim(t, Options{})
			sim.Enqueue("/v1/responses", Reply{Events: tt.events})
			status, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{}`))
			if status != 200 || string(b) != tt.want {
				t.Errorf("got %d %q, want %q", status, b, tt.want)
			}
		})
	}
}

// TestWriteEventAllocations bounds what framing an event costs: the stream's buffer is
// reused, so an event allocates only go-sse's list of its data lines.
func TestWriteEventAllocations(t *testing.T) {
	var buf bytes.Buffer
	ev := Event{Type: "response.output_text.delta", Data: `{"type":"response.output_text.delta","delta":"tick "}`}
	if err := writeEvent(&bytes.Buffer{}, &buf, ev); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	allocs := testing.AllocsPerRun(100, func() {
		out.Reset()
		_ = writeEvent(&out, &buf, ev)
	})
	if allocs > 1 {
		t.Errorf("%v allocations per event, want at most 1", allocs)
	}
}

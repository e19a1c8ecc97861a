package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/ratelimit"
)

// One classifier for every reader of the platform's events.
func TestClassify(t *testing.T) {
	cases := []struct {
		typ  string
		data string
		want Kind
	}{
		{"response.output_text.delta", "", KindDelta},
		{"response.refusal.delta", "", KindDelta},
		{"response.reasoning_summary_text.delta", "", KindDelta},
		{"response.reasoning_text.delta", "", KindDelta},
		{"response.function_call_arguments.delta", "", KindDelta},
		{"response.custom_tool_call_input.delta", "", KindDelta},
		{"response.output_text.done", "", KindOther},
		{"response.output_item.done", "", KindItemDone},
		{"response.completed", "", KindTerminal},
		{"response.incomplete", "", KindTerminal},
		{"response.failed", "", KindTerminal},
		{"error", "", KindError},
		{"response.created", "", KindOther},
		{"", `{"type":"response.completed"}`, KindTerminal}, // no event: line, the data's type
		{"", `{"type":"response.output_text.delta"}`, KindDelta},
		{"response.created", `{"type":"response.completed"}`, KindOther}, // the event line wins
		{"", `not json`, KindOther},
		{"", "", KindOther},
	}
	for _, tc := range cases {
		var data []byte
		if tc.data != "" {
			data = []byte(tc.data)
		}
		if got := KindOf(tc.typ, data); got != tc.want {
			t.Errorf("KindOf(%q, %s) = %d, want %d", tc.typ, tc.data, got, tc.want)
		}
	}
}

// One usage extractor, for a terminal event and for a response object alike.
func TestUsage(t *testing.T) {
	full := `"usage":{"input_tokens":12,"output_tokens":34,"input_tokens_details":{"cached_tokens":5},"output_tokens_details":{"reasoning_tokens":7}}`
	want := ratelimit.Usage{InputTokens: 12, OutputTokens: 34, CachedInputTokens: 5, ReasoningTokens: 7}
	cases := []struct {
		name, terminal string
		want           ratelimit.Usage
		ok             bool
	}{
		{"full", `{"type":"response.completed","response":{"id":"r",` + full + `}}`, want, true},
		{"bare", `{"response":{"usage":{"input_tokens":1,"output_tokens":2}}}`, ratelimit.Usage{InputTokens: 1, OutputTokens: 2}, true},
		{"no_usage", `{"response":{"id":"r"}}`, ratelimit.Usage{}, false},
		{"null_usage", `{"response":{"usage":null}}`, ratelimit.Usage{}, false},
		{"no_response", `{"usage":{"input_tokens":1}}`, ratelimit.Usage{}, false},
		{"garbage", `{"response":`, ratelimit.Usage{}, false},
	}
	for _, tc := range cases {
		u, ok := TerminalUsage([]byte(tc.terminal))
		if u != tc.want || ok != tc.ok {
			t.Errorf("%s: TerminalUsage = %+v %t, want %+v %t", tc.name, u, ok, tc.want, tc.ok)
		}
		obj := ResponseObject([]byte(tc.terminal))
		if obj == nil {
			continue
		}
		if u, ok := ResponseUsage(obj); u != tc.want || ok != tc.ok {
			t.Errorf("%s: ResponseUsage = %+v %t, want %+v %t", tc.name, u, ok, tc.want, tc.ok)
		}
	}
}

// The terminal event's response is lent in place, not copied.
func TestResponseObjectIsAView(t *testing.T) {
	data := []byte(`{"type":"response.completed","response":{"id":"r","output":[]}}`)
	obj := ResponseObject(data)
	if string(obj) != `{"id":"r","output":[]}` {
		t.Fatalf("object %q", obj)
	}
	if &obj[0] != &data[bytes.Index(data, []byte(`{"id"`))] {
		t.Fatal("the object was copied out of the event")
	}
	for _, in := range []string{`{"response":[1]}`, `{}`, ``, `nope`} {
		if obj := ResponseObject([]byte(in)); obj != nil {
			t.Errorf("ResponseObject(%q) = %q, want nil", in, obj)
		}
	}
}

// The error event a failed stream ends with carries the flat fields and the nested object,
// framed as an SSE event of its own for an HTTP client.
func TestErrorEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := NewWriter(rec, 0).Event("error", ErrorData("upstream_stream_ended", "The platform's stream ended before the response was complete.")); err != nil {
		t.Fatal(err)
	}
	ev := rec.Body.Bytes()
	er := NewEventReader(bytes.NewReader(ev), MaxEventSize)
	got, err := er.Next()
	if err != nil || got.Type != "error" {
		t.Fatalf("event %q: %v", ev, err)
	}
	var body struct {
		Type, Code, Message string
		Param               *string
		Error               struct {
			Message, Type string
			Param         *string
			Code          string
		}
	}
	if err := json.Unmarshal(got.Data, &body); err != nil {
		t.Fatalf("data %s: %v", got.Data, err)
	}
	if body.Type != "error" || body.Code != "upstream_stream_ended" || body.Error.Code != body.Code ||
		body.Error.Type != "server_error" || body.Error.Message != body.Message || body.Param != nil || body.Error.Param != nil {
		t.Fatalf("error event %s", got.Data)
	}
	if KindOf(got.Type, got.Data) != KindError {
		t.Fatal("the error event is not classified as one")
	}
}

func TestStreamEndKind(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, "stream_truncated"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("read: %w", context.Canceled), "canceled"},
		{ErrEventTooLarge, "stream_event_too_large"},
		{errors.New("bufio.Scanner: token too long"), "stream_event_too_large"},
	}
	for _, tc := range cases {
		if got := StreamEndKind(tc.err); got != tc.want {
			t.Errorf("StreamEndKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Whatever an event holds, classifying it, reading its usage and lending its response
// neither panics nor reaches outside the event's bytes.
func FuzzTerminalEvent(f *testing.F) {
	f.Add("response.completed", []byte(`{"response":{"usage":{"input_tokens":1,"output_tokens":2}}}`))
	f.Add("", []byte(`{"type":"response.failed","response":{"usage":null}}`))
	f.Add("error", []byte(`{"response":"x"}`))
	f.Add("", []byte(`{"response":{"a":"\u0041"}, "response":{}}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		_ = KindOf(typ, data)
		_, _ = TerminalUsage(data)
		obj := ResponseObject(data)
		if obj != nil && !json.Valid(obj) && json.Valid(data) {
			t.Fatalf("response %q of valid %q is not JSON", obj, data)
		}
	})
}

// DrainAfterCut counts the billed deltas in flight and stops at the terminal event, whose
// usage is then the platform's own.
func TestDrainAfterCut(t *testing.T) {
	delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n"
	terminal := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":9}}}\n\n"
	cases := []struct {
		name, stream string
		want         ratelimit.Usage
		reported     bool
	}{
		{"terminal", delta + delta + terminal, ratelimit.Usage{InputTokens: 3, OutputTokens: 9}, true},
		{"cut", delta + delta + delta, ratelimit.Usage{InputTokens: 1, OutputTokens: 4}, false},
		{"error", delta + "event: error\ndata: {\"type\":\"error\"}\n\n" + delta, ratelimit.Usage{InputTokens: 1, OutputTokens: 2}, false},
		{"garbage", delta + "<html>\n\n" + delta, ratelimit.Usage{InputTokens: 1, OutputTokens: 2}, false},
	}
	for _, tc := range cases {
		cancelled := 0
		er := NewEventReader(strings.NewReader(tc.stream), MaxEventSize)
		u, reported := DrainAfterCut(er, func() { cancelled++ }, ratelimit.Usage{InputTokens: 1, OutputTokens: 1})
		if u != tc.want || reported != tc.reported || cancelled == 0 {
			t.Errorf("%s: %+v %t (cancelled %d), want %+v %t", tc.name, u, reported, cancelled, tc.want, tc.reported)
		}
	}
}

// Every terminal event states a status, and only terminal events do.
func TestTerminalStatus(t *testing.T) {
	for typ, want := range map[string]string{
		"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed",
		"response.output_item.done": "", "error": "", "": "",
	} {
		if got := TerminalStatus(typ); got != want {
			t.Errorf("TerminalStatus(%q) = %q, want %q", typ, got, want)
		}
		if (TerminalStatus(typ) != "") != (Classify(typ) == KindTerminal) {
			t.Errorf("%q: TerminalStatus and Classify disagree", typ)
		}
	}
}

// An abandoned stream is read to its terminal usage; one that stalls is given up after the
// drain's time bound, its call cancelled, with what was read.
func TestDrainAbandoned(t *testing.T) {
	delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n"
	terminal := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":9}}}\n\n"
	cases := []struct {
		name, stream string
		stall        bool // the stream stays open after its bytes until the call is cancelled
		want         ratelimit.Usage
		reported     bool
	}{
		{name: "terminal", stream: delta + delta + terminal, want: ratelimit.Usage{InputTokens: 3, OutputTokens: 9}, reported: true},
		{name: "truncated", stream: delta + delta, want: ratelimit.Usage{OutputTokens: 2}},
		{name: "stalls", stream: delta, stall: true, want: ratelimit.Usage{OutputTokens: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				_, _ = pw.Write([]byte(tc.stream))
				if !tc.stall {
					pw.Close()
				}
			}()
			cancelled := make(chan struct{})
			var once sync.Once
			cancel := func() { once.Do(func() { close(cancelled); pr.CloseWithError(context.Canceled) }) }
			start := time.Now()
			u, reported := DrainAbandoned(pr, cancel)
			if elapsed := time.Since(start); elapsed > cutDrainTime+2*time.Second {
				t.Errorf("the drain took %v", elapsed)
			}
			select {
			case <-cancelled:
			default:
				t.Errorf("the call was not cancelled")
			}
			if u != tc.want || reported != tc.reported {
				t.Errorf("%+v %t, want %+v %t", u, reported, tc.want, tc.reported)
			}
		})
	}
}

package wsmode

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/translate"
)

// answerWith writes an HTTP answer to a fresh turnWriter and returns it with the frames sent.
func answerWith(status int, header map[string]string, body string) (*turnWriter, []string) {
	var frames []string
	w := newTurnWriter(func(d []byte) error { frames = append(frames, string(d)); return nil })
	for k, v := range header {
		w.Header().Set(k, v)
	}
	if status != 0 {
		w.WriteHeader(status)
	}
	if body != "" {
		_, _ = w.Write([]byte(body))
	}
	return w, frames
}

func TestTurnWriterFinish(t *testing.T) {
	const refusal = `{"error":{"message":"Rate limit reached.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	cases := []struct {
		name    string
		status  int
		header  map[string]string
		body    string
		want    int               // the event's status
		code    string            // its error code
		headers map[string]string // headers expected as fields (nil: none)
	}{
		{name: "refusal with limit headers", status: 429, body: refusal, want: 429, code: "rate_limit_exceeded",
			header: map[string]string{"Content-Type": "application/json", "Retry-After": "7", "X-Ratelimit-Limit-Requests": "1",
				"X-Ratelimit-Remaining-Requests": "0", "X-Request-Id": "req-1", "Set-Cookie": "no", "Content-Length": "99"},
			headers: map[string]string{"retry-after": "7", "x-ratelimit-limit-requests": "1", "x-ratelimit-remaining-requests": "0", "x-request-id": "req-1"}},
		{name: "bad request without headers", status: 400, body: `{"error":{"message":"m","type":"invalid_request_error","param":"model","code":"x"}}`,
			want: 400, code: "x"},
		{name: "answer not JSON", status: 502, body: "<html>bad gateway</html>", want: 502},
		{name: "no answer at all", want: 500},
		{name: "a 200 that is not a stream", status: 200, header: map[string]string{"Content-Type": "application/json"},
			body: `{"id":"resp_1","object":"response"}`, want: 200},
		{name: "error not an object", status: 400, body: `{"error":"nope"}`, want: 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, frames := answerWith(c.status, c.header, c.body)
			ev := w.finish()
			if len(frames) != 0 {
				t.Errorf("frames sent before finish: %q", frames)
			}
			if !translate.ValidJSON(ev) {
				t.Fatalf("not JSON: %s", ev)
			}
			e := gjson.ParseBytes(ev)
			if e.Get("type").Str != "error" || e.Get("status").Int() != int64(c.want) {
				t.Errorf("event %s: want an error event with status %d", ev, c.want)
			}
			if e.Get("error.code").Str != c.code || e.Get("error.message").Str == "" || e.Get("error.type").Str == "" {
				t.Errorf("error object %s, want code %q, a type and a message", e.Get("error").Raw, c.code)
			}
			for _, where := range []string{"headers", "error.headers"} {
				got := map[string]string{}
				for k, v := range e.Get(where).Map() {
					got[k] = v.Str
				}
				if len(got) != len(c.headers) {
					t.Errorf("%s = %v, want %v", where, got, c.headers)
				}
				for k, v := range c.headers {
					if got[k] != v {
						t.Errorf("%s[%s] = %q, want %q", where, k, got[k], v)
					}
				}
			}
		})
	}
}

// A long non-stream answer is kept bounded.
func TestTurnWriterBoundsAnswer(t *testing.T) {
	w, _ := answerWith(500, nil, "")
	for range 100 {
		_, _ = w.Write([]byte(strings.Repeat("x", 4096)))
	}
	if len(w.answer) > maxAnswer {
		t.Errorf("kept %d bytes", len(w.answer))
	}
}

// A stream's events, handed over whole, go out as frames; the terminal response is kept for
// the chains, and its frame waits for sendHeld (the turn sends it once the connection took the
// turn's end in); a send that fails stops the stream with its error. Bytes written to a
// stream are refused: its events come whole, never to be read back from SSE.
func TestTurnWriterStream(t *testing.T) {
	events := []struct{ typ, data string }{
		{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"r1"}}`},
		{"response.completed", `{"type":"response.completed","sequence_number":1,"response":{"id":"r1","output":[]}}`},
	}
	w, _ := answerWith(0, map[string]string{"Content-Type": "text/event-stream"}, "")
	var frames []string
	w.send = func(d []byte) error { frames = append(frames, string(d)); return nil }
	w.WriteHeader(http.StatusOK)
	for _, ev := range events {
		if err := w.Event(ev.typ, []byte(ev.data)); err != nil {
			t.Fatal(err)
		}
	}
	if len(frames) != 1 || frames[0] != events[0].data {
		t.Fatalf("frames before the turn took in its end: %q", frames)
	}
	if err := w.sendHeld(); err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 || frames[1] != events[1].data || w.held != nil {
		t.Fatalf("frames %q, still held %q", frames, w.held)
	}
	if w.finish() != nil {
		t.Error("a stream finished with an error event")
	}
	if gjson.GetBytes(w.terminal, "id").Str != "r1" || w.id != "r1" || w.lastSeq.Load() != 1 {
		t.Errorf("terminal %s, id %q, last sequence %d", w.terminal, w.id, w.lastSeq.Load())
	}
	if _, err := w.Write([]byte("data: {}\n\n")); !errors.Is(err, errNotEvents) {
		t.Errorf("bytes written to a stream: %v", err)
	}
	if ev := gjson.ParseBytes(w.finish()); ev.Get("type").Str != "error" || ev.Get("status").Int() != 500 {
		t.Errorf("a stream written as bytes finished with %s, want a 500 error event", ev.Raw)
	}

	gone := errors.New("gone")
	w, _ = answerWith(0, map[string]string{"Content-Type": "text/event-stream"}, "")
	w.send = func([]byte) error { return gone }
	w.WriteHeader(http.StatusOK)
	if err := w.Event("response.created", []byte(events[0].data)); !errors.Is(err, gone) {
		t.Errorf("event after the client left: %v", err)
	}
	if err := w.Event("response.completed", []byte(events[1].data)); !errors.Is(err, gone) {
		t.Errorf("second event: %v", err)
	}
}

// Two events that end a stream, one after the other (an error event, then response.failed):
// the first goes out as the second comes, and only the last waits for the turn.
func TestTurnWriterHoldsOnlyTheLastEnd(t *testing.T) {
	w, _ := answerWith(0, map[string]string{"Content-Type": "text/event-stream"}, "")
	var frames []string
	w.send = func(d []byte) error { frames = append(frames, string(d)); return nil }
	w.WriteHeader(http.StatusOK)
	ends := []string{`{"type":"error","sequence_number":0}`, `{"type":"response.failed","sequence_number":1,"response":{"id":"r1"}}`}
	_ = w.Event("error", []byte(ends[0]))
	if len(frames) != 0 {
		t.Fatalf("frames %q: an error event ending the stream should wait", frames)
	}
	_ = w.Event("response.failed", []byte(ends[1]))
	if len(frames) != 1 || frames[0] != ends[0] {
		t.Fatalf("frames %q: the error event should have gone as response.failed came", frames)
	}
	if err := w.sendHeld(); err != nil || len(frames) != 2 || frames[1] != ends[1] {
		t.Fatalf("frames %q (%v)", frames, err)
	}
}

// What the route tells a turn through its writer: the input it sent (and whether the
// platform holds the chain), what it was charged.
func TestTurnWriterNotes(t *testing.T) {
	w, _ := answerWith(0, nil, "")
	w.SentInput([]byte(`{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`))
	w.Settled(Usage{Input: 3, Output: 2, Cached: 1})
	if !w.sent.noted || w.sent.chained || gjson.GetBytes(w.sent.input, "#").Int() != 2 || w.settled != (Usage{Input: 3, Output: 2, Cached: 1}) {
		t.Errorf("noted %+v, settled %+v", w.sent, w.settled)
	}
	w.SentInput([]byte(`{"model":"m","input":"c","previous_response_id":"resp_1"}`))
	if !w.sent.chained || gjson.GetBytes(w.sent.input, "0.content").Str != "c" {
		t.Errorf("noted %+v (%s)", w.sent, w.sent.input)
	}
}

// A prepare is answered by response.created and response.completed of one response with no
// output and no usage, as the Codex CLI checks before it trusts the chain.
func TestPreparedEvents(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	created, completed, response := preparedEvents("gpt-test", now)
	c, d, r := gjson.ParseBytes(created), gjson.ParseBytes(completed), gjson.ParseBytes(response)
	if c.Get("type").Str != "response.created" || d.Get("type").Str != "response.completed" {
		t.Fatalf("types %s, %s", c.Get("type"), d.Get("type"))
	}
	if c.Get("sequence_number").Int() != 0 || d.Get("sequence_number").Int() != 1 {
		t.Errorf("sequence numbers %s, %s", c.Get("sequence_number"), d.Get("sequence_number"))
	}
	id := d.Get("response.id").Str
	if !strings.HasPrefix(id, "resp_") || len(id) != len("resp_")+48 || c.Get("response.id").Str != id || r.Get("id").Str != id {
		t.Errorf("ids %q %q %q", c.Get("response.id").Str, id, r.Get("id").Str)
	}
	if c.Get("response.status").Str != "in_progress" || d.Get("response.status").Str != "completed" || r.Get("status").Str != "completed" {
		t.Errorf("statuses %s / %s", c.Get("response.status"), d.Get("response.status"))
	}
	for _, ev := range []gjson.Result{c.Get("response"), d.Get("response")} {
		if ev.Get("output").Raw != "[]" || ev.Get("usage.total_tokens").Int() != 0 || ev.Get("usage.input_tokens").Int() != 0 ||
			ev.Get("model").Str != "gpt-test" || ev.Get("created_at").Int() != now.Unix() || ev.Get("object").Str != "response" {
			t.Errorf("response %s", ev.Raw)
		}
	}
	_, again, _ := preparedEvents("gpt-test", now)
	if gjson.GetBytes(again, "response.id").Str == id {
		t.Error("two prepares got one id")
	}
}

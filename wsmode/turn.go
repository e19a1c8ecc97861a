package wsmode

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tidwall/gjson"
)

// maxAnswer bounds the answer of a turn that did not stream (a refusal or an error): what
// becomes its error event.
const maxAnswer = 64 << 10

// turnWriter is the ResponseWriter a turn's in-process POST /v1/responses writes to. A stream's
// events go out as frames as they come, each flushed by the relay as it would be to an HTTP
// client; any other answer is kept, bounded, to become one error event when the handler
// returns.
type turnWriter struct {
	header http.Header
	status int
	stream bool // the answer is an event stream
	events eventSplitter
	answer []byte
	err    error // the first frame that could not be sent: the client is gone, or a steer stopped the stream
	// terminal is the response object of the stream's response.completed or
	// response.incomplete event (a copy), for the connection's chains.
	terminal []byte
	send     func(data []byte) error

	// tag is the lane's stream_id member each event gets (lane.go); frame the buffer a
	// tagged event is built in.
	tag   []byte
	frame []byte
	// id and created are the response's id and object, from its response.created;
	// onCreated, when set, is told the id then (a steer may name it from then on).
	id        string
	created   []byte
	onCreated func(id string)
	// stop asks the stream to end at its next output boundary (a steer, from the reading
	// goroutine); steered says it did. lastSeq is the last event's sequence_number.
	stop    atomic.Bool
	steered bool
	lastSeq atomic.Int64
	out     partialOutput
}

func newTurnWriter(send func([]byte) error) *turnWriter {
	w := &turnWriter{header: http.Header{}, send: send}
	w.events.emit = w.emit
	return w
}

func (w *turnWriter) Header() http.Header { return w.header }

func (w *turnWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 {
		return
	}
	w.status = code
	w.stream = code == http.StatusOK && strings.HasPrefix(w.header.Get("Content-Type"), "text/event-stream")
}

func (w *turnWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if !w.stream {
		if room := maxAnswer - len(w.answer); room > 0 {
			w.answer = append(w.answer, p[:min(len(p), room)]...)
		}
		return len(p), nil
	}
	if err := w.events.write(p); err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

// Flush is a no-op: each event is sent as a frame as soon as it is complete.
func (w *turnWriter) Flush() {}

// errSteered stops a relay at the output boundary where a steered response ends.
var errSteered = errors.New("wsmode: the response was steered")

// emit sends one event's data as a frame, tagged with its lane, and keeps the response of a
// terminal event that the next turn may continue. A response asked to stop (steered) ends
// before the next event that starts or extends output: the relay reads the refusal as a
// client that left, and cuts and charges the stream as it would then.
func (w *turnWriter) emit(data []byte) error {
	var f eventFields
	f.read(data)
	typ := f.typ.Str
	if w.stop.Load() && cutsBefore(typ) {
		w.steered = true
		return errSteered
	}
	switch typ {
	case "response.output_text.delta":
		w.out.delta(f.itemID.Str, f.delta.Str)
	case "response.created":
		r := gjson.GetBytes(data, "response")
		w.created, w.id = []byte(r.Raw), r.Get("id").Str
		if w.onCreated != nil && w.id != "" {
			w.onCreated(w.id)
		}
	case "response.completed", "response.incomplete":
		w.terminal = []byte(gjson.GetBytes(data, "response").Raw)
	case "response.output_item.added", "response.output_item.done":
		w.out.item(typ, gjson.GetBytes(data, "item"))
	}
	if f.seq.Exists() {
		w.lastSeq.Store(f.seq.Int())
	}
	if len(w.tag) == 0 {
		return w.send(data)
	}
	w.frame = tagEvent(w.frame[:0], data, w.tag)
	return w.send(w.frame)
}

// eventFields are the members of an event the socket reads, views of its data (read before
// the data changes).
type eventFields struct {
	typ, seq, itemID, delta gjson.Result
}

// read reads them in one pass over the event's top level, stopped once what the event's type
// needs was found: a text delta's item_id and delta are kept for the partial output.
func (f *eventFields) read(data []byte) {
	gjson.Parse(view(data)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type":
			f.typ = v
		case "sequence_number":
			f.seq = v
		case "item_id":
			f.itemID = v
		case "delta":
			f.delta = v
		}
		if !f.typ.Exists() || !f.seq.Exists() {
			return true
		}
		return f.typ.Str == "response.output_text.delta" && (!f.itemID.Exists() || !f.delta.Exists())
	})
}

// cutsBefore reports whether a steered response stops before an event of type typ: one that
// starts an output item or part, or adds to one. What was streamed stays whole; an event that
// closes what was started still passes, and so does the terminal event (a response that
// finished anyway completes, and its successor follows).
func cutsBefore(typ string) bool {
	return strings.HasSuffix(typ, ".delta") || typ == "response.output_item.added" || typ == "response.content_part.added"
}

// finish is the error event of a turn whose answer was not a stream, or nil.
func (w *turnWriter) finish() []byte {
	if w.stream {
		return nil
	}
	status := w.status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	obj := gjson.GetBytes(w.answer, "error")
	if !obj.IsObject() {
		return errorEvent(status, "server_error", "", "", "The turn ended without an answer (HTTP "+strconv.Itoa(status)+").")
	}
	return errorEventFrom(status, []byte(obj.Raw), w.clientHeaders())
}

// clientHeaders are the answer's headers a client acts on, by lower-case name.
func (w *turnWriter) clientHeaders() map[string]string {
	out := map[string]string{}
	for name, vs := range w.header {
		n := strings.ToLower(name)
		if len(vs) == 0 {
			continue
		}
		switch {
		case n == "retry-after", n == "x-should-retry", n == "x-request-id",
			strings.HasPrefix(n, "x-ratelimit-"), strings.HasPrefix(n, "anthropic-ratelimit-"):
			out[n] = vs[0]
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// turnRequest is the in-process POST /v1/responses of one turn: its body, the connection's
// credentials and headers, on ctx, which ends when the client leaves. note receives the input
// the route sends the platform (see NoteSentInput).
func turnRequest(ctx context.Context, body []byte, who *Caller, note *sentNote) *http.Request {
	r, _ := http.NewRequestWithContext(context.WithValue(ctx, turnKey{}, note), http.MethodPost, "/v1/responses", bytes.NewReader(body))
	r.Header = who.Header.Clone()
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(body))
	r.RemoteAddr = who.RemoteAddr
	r.RequestURI = "/v1/responses"
	return r
}

type turnKey struct{}

// sentNote is what the Responses route sent the platform for a turn. A turn whose
// previous_response_id the connection does not hold is expanded by the route, from the
// stored responses: the chain the connection then keeps must start from that whole input,
// not from the turn's own new items, or the next turn would drop the conversation's start.
type sentNote struct {
	noted bool
	input []byte // the input items sent, a JSON array
	// chained: the body still named a previous_response_id when it went to the platform
	// (responses.store: off), so the platform holds the conversation's start, not modelgate.
	chained bool
	// settled is what the turn was charged, once settled (NoteSettled).
	settled settledUsage
}

// IsTurn reports whether ctx is a WebSocket turn's request context.
func IsTurn(ctx context.Context) bool {
	_, ok := ctx.Value(turnKey{}).(*sentNote)
	return ok
}

// NoteSentInput tells a WebSocket turn the body its platform call is sent with, once the
// route has expanded it; outside a turn it does nothing.
func NoteSentInput(ctx context.Context, body []byte) {
	note, ok := ctx.Value(turnKey{}).(*sentNote)
	if !ok || note == nil {
		return
	}
	note.noted = true
	note.input = inputItems(gjson.GetBytes(body, "input"))
	note.chained = gjson.GetBytes(body, "previous_response_id").Exists()
}

// NoteSettled tells a WebSocket turn what its request was charged, once settled: a steered
// response's closing event reports it as its usage. Outside a turn it does nothing.
func NoteSettled(ctx context.Context, input, output, cached, reasoning int64) {
	note, ok := ctx.Value(turnKey{}).(*sentNote)
	if !ok || note == nil {
		return
	}
	note.settled = settledUsage{Input: input, Output: output, Cached: cached, Reasoning: reasoning}
}

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

	"modelgate/relay"
)

// maxAnswer bounds the answer of a turn that did not stream (a refusal or an error): what
// becomes its error event.
const maxAnswer = 64 << 10

// Turn is a turn's response writer as the route that serves it sees it, found along the
// writers that wrap it (TurnOf). It is a relay.Sink: the relay hands it the stream's events
// whole and typed, each one a frame, so nothing here reads SSE bytes back into events; an
// event it refuses (the client is gone, a steer stopped the stream) stops the relay as a
// client that left does. And it is how the route tells the turn what the socket needs of the
// request: that it is a turn (it found one), the input it sent the platform, and what it was
// charged. Every method is called on the handler's goroutine, before ServeHTTP returns.
type Turn interface {
	relay.Sink
	// SentInput is told the body the turn's platform call is sent with, once the route has
	// expanded it. A turn whose previous_response_id the connection does not hold is
	// expanded by the route, from the stored responses: the chain the connection then keeps
	// must start from that whole input, not from the turn's own new items, or the next turn
	// would drop the conversation's start.
	SentInput(body []byte)
	// Settled is told what the turn's request was charged, once settled: a steered
	// response's closing event reports it as its usage.
	Settled(u Usage)
}

// TurnOf is the turn a request's response writer serves, found along the writers that wrap
// it (gin's, a middleware's) as the relay finds its sink; nil for an HTTP client. The route
// asks once per request.
func TurnOf(w http.ResponseWriter) Turn {
	t, _ := relay.SinkOf(w).(Turn)
	return t
}

var _ Turn = (*turnWriter)(nil)

// Usage is what a turn's request was charged, once settled (Turn.Settled).
type Usage struct {
	Input, Output, Cached, Reasoning int64
}

// turnWriter is the ResponseWriter a turn's in-process POST /v1/responses writes to, and the
// Turn the route finds in it. A stream's events come through Event and go out as frames as
// they come; any other answer (a refusal, in the route's error shape) is kept, bounded, to
// become one error event when the handler returns (finish).
type turnWriter struct {
	header http.Header
	status int
	stream bool // the answer is an event stream, its events handed over whole
	answer []byte
	err    error // the first event that could not be sent: the client is gone, or a steer stopped the stream
	// terminal is the response object of the stream's response.completed or
	// response.incomplete event (a copy), for the connection's chains.
	terminal []byte
	send     func(data []byte) error
	// held is the frame of the event that ends the turn, sent by turn once the connection has
	// taken in how the turn ended (its chains, its steers): a client that reads the end and
	// at once names the response on another lane finds its chain remembered.
	held []byte

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

	// What the route told the turn (Turn): the input it sent and whether that input still
	// named a previous_response_id, and what the request was charged.
	sent    sentInput
	settled Usage
}

// sentInput is what the Responses route sent the platform for a turn (Turn.SentInput).
type sentInput struct {
	noted bool
	input []byte // the input items sent, a JSON array
	// chained: the body still named a previous_response_id when it went to the platform
	// (responses.store: off), so the platform holds the conversation's start, not modelgate.
	chained bool
}

func newTurnWriter(send func([]byte) error) *turnWriter {
	return &turnWriter{header: http.Header{}, send: send}
}

func (w *turnWriter) Header() http.Header { return w.header }

func (w *turnWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 {
		return
	}
	w.status = code
	w.stream = code == http.StatusOK && strings.HasPrefix(w.header.Get("Content-Type"), "text/event-stream")
}

// errNotEvents refuses bytes written to a stream: a turn's stream comes as events (Event),
// and bytes there would be an SSE writer the route did not give the turn's sink.
var errNotEvents = errors.New("wsmode: a turn's stream takes events, not bytes")

// Write keeps a non-stream answer, bounded: the refusal finish turns into an error event.
func (w *turnWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.stream {
		if len(p) == 0 {
			return 0, nil
		}
		w.err = errNotEvents
		return 0, w.err
	}
	if room := maxAnswer - len(w.answer); room > 0 {
		w.answer = append(w.answer, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

// Event sends one event of the stream as a frame (see emit).
func (w *turnWriter) Event(typ string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if !w.stream {
		// The relay hands events only once the stream started (relay.StartStream), so a
		// stream it is; this keeps a writer that saw no header from taking it as a refusal.
		w.status, w.stream = http.StatusOK, true
	}
	if err := w.emit(typ, data); err != nil {
		w.err = err
		return err
	}
	return nil
}

// SentInput notes the body the route sends the platform (Turn).
func (w *turnWriter) SentInput(body []byte) {
	w.sent = sentInput{noted: true, input: inputItems(gjson.GetBytes(body, "input")),
		chained: gjson.GetBytes(body, "previous_response_id").Exists()}
}

// Settled notes what the request was charged (Turn).
func (w *turnWriter) Settled(u Usage) { w.settled = u }

// Flush is a no-op: each event is sent as a frame as soon as it is handed over.
func (w *turnWriter) Flush() {}

// errSteered stops a relay at the output boundary where a steered response ends.
var errSteered = errors.New("wsmode: the response was steered")

// emit sends one event's data as a frame, tagged with its lane, and keeps the response of a
// terminal event that the next turn may continue. A response asked to stop (steered) ends
// before the next event that starts or extends output: the relay reads the refusal as a
// client that left, and cuts and charges the stream as it would then.
func (w *turnWriter) emit(typ string, data []byte) error {
	if w.stop.Load() && cutsBefore(typ) {
		w.steered = true
		return errSteered
	}
	var f eventFields
	f.read(typ, data)
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
	frame := data
	if len(w.tag) != 0 {
		w.frame = tagEvent(w.frame[:0], data, w.tag)
		frame = w.frame
	}
	if err := w.sendHeld(); err != nil {
		return err
	}
	if endsTurn(typ) {
		w.held = append([]byte(nil), frame...)
		return nil
	}
	return w.send(frame)
}

// endsTurn reports whether an event of type typ ends a turn's stream: it is held (held). Only
// the last such event waits: one that follows (an error event, then response.failed) sends the
// one before it, in the order they came.
func endsTurn(typ string) bool {
	k := relay.Classify(typ)
	return k == relay.KindTerminal || k == relay.KindError
}

// sendHeld sends the held end of the stream, if any. Nothing follows it from the platform;
// should something, the end still goes first, as it came.
func (w *turnWriter) sendHeld() error {
	if w.held == nil {
		return nil
	}
	held := w.held
	w.held = nil
	return w.send(held)
}

// eventFields are the members of an event the socket reads, views of its data (read before
// the data changes).
type eventFields struct {
	seq, itemID, delta gjson.Result
}

// read reads them in one pass over the event's top level, stopped once what an event of type
// typ needs was found: a text delta's item_id and delta are kept for the partial output.
func (f *eventFields) read(typ string, data []byte) {
	text := typ == "response.output_text.delta"
	gjson.Parse(view(data)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "sequence_number":
			f.seq = v
		case "item_id":
			f.itemID = v
		case "delta":
			f.delta = v
		}
		return !f.seq.Exists() || text && (!f.itemID.Exists() || !f.delta.Exists())
	})
}

// cutsBefore reports whether a steered response stops before an event of type typ: one that
// starts an output item or part, or adds to one. What was streamed stays whole; an event that
// closes what was started still passes, and so does the terminal event (a response that
// finished anyway completes, and its successor follows).
func cutsBefore(typ string) bool {
	return strings.HasSuffix(typ, ".delta") || typ == "response.output_item.added" || typ == "response.content_part.added"
}

// finish is the error event of a turn whose answer was not a stream (or whose stream came as
// bytes), or nil.
func (w *turnWriter) finish() []byte {
	if w.stream {
		if errors.Is(w.err, errNotEvents) {
			// Something wrote the stream as bytes: the turn ended with nothing the
			// client can read as its end, so it is told, not left waiting.
			return errorEvent(http.StatusInternalServerError, "server_error", "", "", "The turn's stream could not be relayed.")
		}
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
// credentials and headers, on ctx, which ends when the client leaves. What the route tells
// the turn goes through its writer (Turn), not the request's context.
func turnRequest(ctx context.Context, body []byte, who *Caller) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/responses", bytes.NewReader(body))
	r.Header = who.Header.Clone()
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(body))
	r.RemoteAddr = who.RemoteAddr
	r.RequestURI = "/v1/responses"
	return r
}

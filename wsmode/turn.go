package wsmode

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"

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
	err    error // the first frame that could not be sent: the client is gone
	// terminal is the response object of the stream's response.completed or
	// response.incomplete event (a copy), for the connection's chains.
	terminal []byte
	send     func(data []byte) error
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

// emit sends one event's data as a frame, and keeps the response of a terminal event that
// the next turn may continue.
func (w *turnWriter) emit(data []byte) error {
	switch gjson.GetBytes(data, "type").Str {
	case "response.completed", "response.incomplete":
		w.terminal = []byte(gjson.GetBytes(data, "response").Raw)
	}
	return w.send(data)
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

package relay

import (
	"errors"
	"net/http"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Sink takes a Responses stream's events whole, typed, where an HTTP client takes their SSE
// bytes. The HTTP stream writer (Writer) is one sink; a WebSocket turn is another: each event
// becomes a frame, so the turn need not read the SSE bytes back into events.
//
// A response writer that is a sink is found along the chain of writers that wrap it
// (SinkOf), gin's included, so a route streams to it exactly as it streams to an HTTP client
// and never asks which it serves.
type Sink interface {
	// Event takes one event: typ its type, data its data (a JSON object), both lent until the
	// call returns. An error means the sink takes no more: the relay then ends the stream as it
	// does for a client that left.
	Event(typ string, data []byte) error
}

// unwrapper is a response writer that wraps another (gin's, net/http's controllers read the
// same method).
type unwrapper interface {
	Unwrap() http.ResponseWriter
}

// maxUnwrap bounds the walk down a chain of wrappers: a writer that unwraps to itself, or a
// cycle, must not hold a request forever.
const maxUnwrap = 16

// SinkOf is the sink w is, or wraps; nil when there is none (an HTTP client, which takes
// bytes). It is asked once per stream, not per event.
func SinkOf(w http.ResponseWriter) Sink {
	for range maxUnwrap {
		if s, ok := w.(Sink); ok {
			return s
		}
		u, ok := w.(unwrapper)
		if !ok {
			return nil
		}
		if w = u.Unwrap(); w == nil {
			return nil
		}
	}
	return nil
}

// SinkWriter is a Writer whose client is s alone, with no response writer under it: a
// background job, which reads its platform call's answer through the same pump as an HTTP
// client or a WebSocket turn (Pump.Responses) and keeps what the events say instead of
// sending them. It runs no keep-alive, and bytes written to it are refused as a sink's
// writer refuses them (errNoBytes): a pump that writes bytes (a translated one) sees a
// client that left, never a silent loss.
func SinkWriter(s Sink) *Writer { return &Writer{w: noBytes{}, sink: s} }

// errNoBytes is what a SinkWriter's byte path answers.
var errNoBytes = errors.New("relay: this client takes events, not bytes")

// noBytes is the byte side of a SinkWriter: none is taken.
type noBytes struct{}

func (noBytes) Write([]byte) (int, error) { return 0, errNoBytes }
func (noBytes) Flush()                    {}

// sinkEventType is an event's type for a sink: its "event:" name, or its data's "type" when it
// came without one (interned as the reader interns names, so the type is no view of the
// event's memory). Asked on the sink's path only: the HTTP path forwards the bytes.
func sinkEventType(ev *Event) string {
	if ev.Type != "" {
		return ev.Type
	}
	typ := gjson.Get(unsafe.String(unsafe.SliceData(ev.Data), len(ev.Data)), "type").Str
	return eventType(unsafe.Slice(unsafe.StringData(typ), len(typ)))
}

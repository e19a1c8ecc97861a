package relay

import (
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

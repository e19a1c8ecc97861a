package platformsim

import (
	"net"
	"net/http"

	"github.com/tidwall/sjson"
)

// Fault is a transport failure injected into an answer.
type Fault int

const (
	FaultNone Fault = iota
	// FaultResetMidStream sends AfterEvents events (a plain body: half of it), then closes the
	// TCP connection abruptly (RST).
	FaultResetMidStream
	// FaultTruncate stops without the terminal event and ends the body cleanly: after
	// AfterEvents events, or when it is 0 after every event but the last (a plain body: half).
	FaultTruncate
	// FaultGarbage writes non-SSE bytes (and a data line that is not JSON) after AfterEvents
	// events, or half of them when it is 0, and ends there. A plain body is replaced by them.
	FaultGarbage
	// FaultInvalidJSON answers 200 with a broken JSON body; in a stream, after AfterEvents
	// events (half when 0) an event whose data is cut-off JSON, then the end.
	FaultInvalidJSON
	// FaultStallMidStream sends AfterEvents events (a plain body: half of it, Content-Length
	// promising all) and then blocks until the client leaves.
	FaultStallMidStream
	// FaultStallBeforeHeaders blocks until the client leaves, sending nothing.
	FaultStallBeforeHeaders
	// FaultDeepNesting sends, after AfterEvents events (half when 0), one event whose data
	// is well-formed JSON nested DeepNesting levels deep, then the rest of the stream as if
	// nothing happened. A plain body gets the same nested value as an extra field.
	FaultDeepNesting
	// FaultStallAfterBilling charges the answer as a real platform would before its headers
	// go out (a plain body in full, since it is generated before it is sent; a stream its
	// input), then blocks until the client leaves, sending nothing: the call a gateway sees
	// time out or abandons, billed all the same.
	FaultStallAfterBilling
	// FaultNoUsage sends the answer whole but without its usage object (a stream's events,
	// the terminal one included, and a plain body alike), billed as usual: a platform that
	// charged a call and did not say how much.
	FaultNoUsage
)

// DeepNesting is how deeply FaultDeepNesting's value nests: far past any real event, and
// well within encoding/json's own bound (10,000 levels, the event's envelope included), so
// the event is JSON to every parser a test may use and only its depth is at fault.
const DeepNesting = 5_000

// deepValue is an array nested DeepNesting levels deep, innermost empty.
func deepValue() []byte {
	b := make([]byte, 0, 2*DeepNesting)
	for range DeepNesting {
		b = append(b, '[')
	}
	for range DeepNesting {
		b = append(b, ']')
	}
	return b
}

// deepEvent is the event FaultDeepNesting puts on the wire. Its type is one the platform
// does not bill and a chat client does not see, so only the nesting can end the stream.
func deepEvent() []byte {
	b := []byte("event: response.output_text.annotation.added\ndata: " +
		`{"type":"response.output_text.annotation.added","output_index":0,"content_index":0,"annotation_index":0,"annotation":{"type":"nested","value":`)
	b = append(b, deepValue()...)
	return append(b, "}}\n\n"...)
}

// deepBody adds the nested value to a JSON object body as its first field.
func deepBody(body []byte) []byte {
	if len(body) < 2 || body[0] != '{' {
		return body
	}
	b := append([]byte(`{"nested":`), deepValue()...)
	if len(body) > 2 {
		b = append(b, ',')
	}
	return append(b, body[1:]...)
}

// garbage is what FaultGarbage puts on the wire: binary junk, an HTML line, a field-less line
// and a data line that is not JSON, so both strict and lenient SSE parsers see a broken stream.
var garbage = []byte("\x00\x01\xfe\xffgarbage\n<html><body>502 Bad Gateway</body></html>\n\ndata: {not json\n\n")

// streamCut returns the number of events sent before fault f strikes, or -1 for no cut.
func streamCut(f Fault, after, n int) int {
	after = max(after, 0)
	switch f {
	case FaultResetMidStream, FaultStallMidStream:
		return min(after, n)
	case FaultTruncate:
		if after > 0 {
			return min(after, n)
		}
		return max(n-1, 0)
	case FaultGarbage, FaultInvalidJSON, FaultDeepNesting:
		if after > 0 {
			return min(after, n)
		}
		return n / 2
	}
	return -1
}

// brokenJSON returns a prefix of body that no JSON parser accepts.
func brokenJSON(body []byte) []byte {
	if len(body) < 4 {
		return []byte(`{"id":`)
	}
	return append([]byte(nil), body[:len(body)/2]...)
}

// resetConn closes the client connection with an RST. Where the connection cannot be taken
// over (HTTP/2), aborting the handler resets the stream instead.
func resetConn(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// withoutUsage deletes the usage object at path from a JSON document; a document without one
// is returned as it is.
func withoutUsage(doc []byte, path string) []byte {
	out, err := sjson.DeleteBytes(doc, path)
	if err != nil {
		return doc
	}
	return out
}

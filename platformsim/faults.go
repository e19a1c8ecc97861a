package platformsim

import (
	"net"
	"net/http"
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
	// FaultStallAfterBilling charges the answer as a real platform would before its headers
	// go out (a plain body in full, since it is generated before it is sent; a stream its
	// input), then blocks until the client leaves, sending nothing: the call a gateway sees
	// time out or abandons, billed all the same.
	FaultStallAfterBilling
)

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
	case FaultGarbage, FaultInvalidJSON:
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

package proxy

import (
	"sync/atomic"
	"time"

	"modelgate/relay"
)

// The request record is what package relay reports to (relay.Observer): the relay tells,
// the record keeps, and the relay never reaches the server or the gin context.

// Event notes one upstream event for the trace; a terminal one carries the whole response.
func (ri *requestInfo) Event(typ string, data []byte) {
	if ri.trace != nil {
		ri.traceEventOn(typ, data)
	}
}

// Sent notes a write that reached the client: the first one is the time to first byte.
func (ri *requestInfo) Sent() {
	if ri.TTFB == 0 {
		ri.TTFB = time.Since(ri.Start)
	}
	if ri.trace != nil {
		ri.trace.EventSent()
	}
}

// Response hands a Responses stream's terminal response to the request's observer (stored
// responses keep it there). The object is lent in place: the keeper copies what it keeps.
func (ri *requestInfo) Response(terminal []byte) {
	if ri.onResponse != nil {
		if obj := relay.ResponseObject(terminal); obj != nil {
			ri.onResponse(obj)
		}
	}
}

// ClientGone notes that the client left before the answer was complete.
func (ri *requestInfo) ClientGone() { ri.ClientClosed = true }

// UpstreamFailed names the platform-side failure for the access log and the metrics.
func (ri *requestInfo) UpstreamFailed(kind string) { ri.UpstreamErr = kind }

// waitClock is where reading an answer counts as upstream time, or nil when that time is
// not kept (server.overhead_header off).
func (ri *requestInfo) waitClock() *atomic.Int64 {
	if !ri.KeepWait {
		return nil
	}
	return &ri.UpstreamWait
}

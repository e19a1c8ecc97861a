package proxy

import (
	"context"
	"strings"

	"github.com/gin-gonic/gin"

	"modelgate/relay"
	"modelgate/reqlog"
)

// Tracing, when Deps.Tracer is set: a traced request's span and what it learns live in a
// tracing.Request; here are the hooks that tell it. Each sits behind a nil check of the
// Server's tracer or the request's trace, so with tracing off a request creates no span, no
// context and no attribute: the functions here are never reached. They are kept out of line
// (go:noinline where the compiler might inline them) so that the frames of the handlers that
// hold streams open do not grow by what they would need.

// startTrace opens the request's server span, continuing the caller's trace (none for the
// probes: tracing.Tracer.StartRoute).
//
//go:noinline
func (s *Server) startTrace(c *gin.Context, ri *requestInfo) {
	route := c.FullPath()
	if strings.HasSuffix(route, "/*rest") {
		route = geminiTraceRoute(c, route) // the action, as the access log names it
	}
	ri.trace = s.tracer.StartRoute(c.Request.Context(), c.Request, route)
}

// WaitTraced waits until every traced request has ended its span, or ctx ends (see
// tracing.Tracer.WaitEnded).
func (s *Server) WaitTraced(ctx context.Context) { s.tracer.WaitEnded(ctx) }

// A GenAI route (chat, Responses, Messages) tells its trace the call once the request is
// checked (traceCall) and the platform's answer of a non-stream call (traceAnswer); the
// relay reports every upstream stream event and every write of events to the client through
// the record's relay.Observer methods (Event, Sent: relay_record.go). The usage, status,
// attempts and outcome are taken from the request's summary when it ends.

// traceCall notes a model call the preflight checked for the request's span.
func (ri *requestInfo) traceCall(call *modelCall) {
	if ri.trace != nil {
		ri.traceCallOn(call)
	}
}

//go:noinline
func (ri *requestInfo) traceCallOn(call *modelCall) {
	if ri.trace.Recording() {
		ri.trace.Call(printable(call.model, maxLoggedModel), call.maxOut, call.upBody)
	}
}

// traceAnswer notes the platform's answer: a Responses object, from a non-stream body or a
// stream's terminal event. Each choice of an n>1 chat call reports its own.
func (ri *requestInfo) traceAnswer(obj []byte) {
	if ri.trace != nil {
		ri.traceAnswerOn(obj)
	}
}

//go:noinline
func (ri *requestInfo) traceAnswerOn(obj []byte) { relay.TraceAnswer(ri.trace, view(obj)) }

// traceEventOn counts one upstream stream event (relay reports it through Event) and reads
// a terminal one (relay.TraceEvent).
//
//go:noinline
func (ri *requestInfo) traceEventOn(typ string, data []byte) { relay.TraceEvent(ri.trace, typ, data) }

// endTrace records the request's outcome and ends its span; sum gains the trace id the
// access log carries. A connection lost while draining was most likely closed by the
// drain's timeout.
//
//go:noinline
func (s *Server) endTrace(ri *requestInfo, sum *reqlog.RequestSummary) {
	sum.TraceID = ri.trace.EndRequest(sum, ri.ClientClosed, ri.ClientClosed && s.draining.Load())
}

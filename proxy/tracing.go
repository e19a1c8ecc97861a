package proxy

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

	"modelgate/relay"
	"modelgate/reqlog"
	"modelgate/tracing"
)

// Tracing, when Deps.Tracer is set. Every hook below sits behind a nil check of the Server's
// tracer or the request's span, so with tracing off a request creates no span, no context
// and no attribute: the functions here are never reached. They are kept out of line
// (go:noinline where the compiler might inline them) so that the frames of the handlers that
// hold streams open do not grow by what they would need.

// traceState is what a traced request gathers for its server span.
type traceState struct {
	span       trace.Span
	route      string         // the route the span was started with
	contentMax int            // 0: prompts and completions are not captured
	mu         sync.Mutex     // n>1 chat calls report their answers in parallel
	genai      *tracing.GenAI // &genaiData once the route said it is a GenAI call
	genaiData  tracing.GenAI

	// The upstream events a stream read (n>1 chat streams read in parallel) and the writes
	// of events to the client.
	eventsReceived, eventsSent atomic.Int64
	limitDecision              string // "allowed" or "refused" once the limiter was asked
}

// promptField is one request field content capture records, and the attribute it goes in.
type promptField struct{ json, attr string }

// responsesPromptFields are the prompt of a Responses body: every GenAI route captures the
// prompt as it goes upstream, which is a Responses body for all of them.
var responsesPromptFields = []promptField{{"instructions", tracing.AttrSystemInstructions}, {"input", tracing.AttrInputMessages}}

// untracedRoute: probes and scrapes: a span each would drown the traces that matter.
func untracedRoute(route string) bool {
	return route == "/healthz" || route == "/readyz" || route == "/metrics"
}

// startTrace opens the request's server span, continuing the caller's trace.
//
//go:noinline
func (s *Server) startTrace(c *gin.Context, ri *requestInfo) {
	route := c.FullPath()
	if untracedRoute(route) {
		return
	}
	if route == "" {
		route = "unknown"
	}
	// The span stays out of the request's context: a copy of the request per traced request
	// to carry it would cost more than naming it as the parent of each attempt (startAttempt),
	// the one place it is needed.
	_, span := s.tracer.StartServer(c.Request.Context(), c.Request, route)
	ri.trace = &traceState{span: span, route: route, contentMax: s.tracer.ContentMax()}
	s.traced.Add(1)
}

// WaitTraced waits until every traced request has ended its span, or ctx ends. After a drain
// that timed out and closed the remaining connections, their handlers still have to notice
// and end their spans before the last export.
func (s *Server) WaitTraced(ctx context.Context) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.traced.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recording returns the trace state of a request whose span is sampled, or nil: attribute
// work is skipped for spans nobody will see.
func (ri *requestInfo) recording() *traceState {
	if ri.trace == nil || !ri.trace.span.IsRecording() {
		return nil
	}
	return ri.trace
}

// The GenAI hooks below are what a route calls as it learns things; each is a nil check
// inlined at the call site, and the work, out of line, happens only for a traced request.
// A GenAI route (chat, Responses, Messages) calls:
//   - traceRequest once the request is checked;
//   - traceAnswer with the platform's Responses object of a non-stream answer;
//   - the relay reports every upstream stream event and every write of events to the
//     client through the record's relay.Observer methods (Event, Sent: relay_record.go).
// The usage, status, attempts and limit decision are taken from the request's info when it
// ends.

// maxTracedID caps the platform's response id in a span attribute: every attribute a span
// carries is bounded, whoever chose its value (model names are capped at maxLoggedModel).
const maxTracedID = 256

// traceCall notes a model call the preflight checked for the request's span.
func (ri *requestInfo) traceCall(call *modelCall) {
	if ri.trace != nil {
		ri.traceRequestOn(call.model, call.maxOut, call.upBody, responsesPromptFields)
	}
}

//go:noinline
func (ri *requestInfo) traceRequestOn(model string, maxTokens int64, body []byte, prompt []promptField) {
	ts := ri.recording()
	if ts == nil {
		return
	}
	temp := gjson.GetBytes(body, "temperature")
	ts.mu.Lock()
	ts.genaiData = tracing.GenAI{Operation: tracing.OperationChat, RequestModel: strings.Clone(printable(model, maxLoggedModel)), MaxTokens: maxTokens}
	if temp.Type == gjson.Number {
		ts.genaiData.Temperature, ts.genaiData.HasTemperature = temp.Num, true
	}
	ts.genai = &ts.genaiData
	ts.mu.Unlock()
	if ts.contentMax > 0 {
		for _, f := range prompt {
			if r := gjson.GetBytes(body, f.json); r.Exists() {
				tracing.RecordContent(ts.span, tracing.EventPrompt, f.attr, r.Raw, ts.contentMax)
			}
		}
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
func (ri *requestInfo) traceAnswerOn(obj []byte) {
	ri.noteAnswer(unsafe.String(unsafe.SliceData(obj), len(obj)))
}

// noteAnswer reads a Responses object in view, which may be a view of a buffer that is
// reused once the call returns: what the span keeps of it is copied.
func (ri *requestInfo) noteAnswer(view string) {
	ts := ri.recording()
	if ts == nil {
		return
	}
	sum := relay.Summarize(view)
	ts.mu.Lock()
	if g := ts.genai; g != nil {
		if g.ResponseID == "" {
			g.ResponseID = strings.Clone(printable(sum.ID, maxTracedID))
		}
		if g.ResponseModel == "" {
			g.ResponseModel = strings.Clone(printable(sum.Model, maxLoggedModel))
		}
		if sum.FinishReason != "" {
			g.FinishReasons = append(g.FinishReasons, sum.FinishReason)
		}
	}
	ts.mu.Unlock()
	if ts.contentMax > 0 && sum.Output != "" {
		tracing.RecordContent(ts.span, tracing.EventCompletion, tracing.AttrOutputMessages, sum.Output, ts.contentMax)
	}
}

// traceEventOn counts one upstream stream event (relay reports it through Event) and reads
// a terminal one, which carries the whole response.
//
//go:noinline
func (ri *requestInfo) traceEventOn(typ string, data []byte) {
	ri.trace.eventsReceived.Add(1)
	if relay.KindOf(typ, data) == relay.KindTerminal {
		ri.traceTerminal(data)
	}
}

// traceTerminal reads the response a terminal stream event carries.
func (ri *requestInfo) traceTerminal(data []byte) {
	if obj := relay.ResponseObject(data); obj != nil {
		ri.noteAnswer(unsafe.String(unsafe.SliceData(obj), len(obj)))
	}
}

// endTrace records the request's outcome and ends its span; sum gains the trace id the
// access log carries.
//
//go:noinline
func (s *Server) endTrace(ri *requestInfo, sum *reqlog.RequestSummary) {
	ts := ri.trace
	if sc := ts.span.SpanContext(); sc.HasTraceID() {
		sum.TraceID = sc.TraceID().String()
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	g := ts.genai
	if g != nil {
		g.InputTokens, g.OutputTokens = sum.InputTokens, sum.OutputTokens
	}
	defer s.traced.Add(-1)
	tracing.EndServer(ts.span, tracing.Outcome{
		Method: sum.Method, Route: ts.route, RequestID: sum.RequestID, Status: sum.Status, Team: sum.Team, KeyName: sum.Key,
		Attempts: sum.Attempts, LimitDecision: ts.limitDecision, LimitReason: sum.Refusal,
		Stream: sum.Stream, TTFB: sum.TTFB,
		EventsReceived: ts.eventsReceived.Load(), EventsSent: ts.eventsSent.Load(),
		ErrorCode: sum.ErrorCode, UpstreamError: sum.UpstreamErr, ClientGone: ri.ClientClosed,
		// A connection lost while draining was most likely closed by the drain's timeout.
		CutByShutdown: ri.ClientClosed && s.draining.Load(),
	}, g)
}

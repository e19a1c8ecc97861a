package proxy

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

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
	contentMax int        // 0: prompts and completions are not captured
	mu         sync.Mutex // n>1 chat calls report their answers in parallel
	genai      *tracing.GenAI

	// Counted by the handler's goroutine only: the upstream events a stream read and the
	// writes of events to the client.
	eventsReceived, eventsSent int64
	limitDecision              string // "allowed" or "refused" once the limiter was asked
}

// promptField is one request field content capture records, and the attribute it goes in.
type promptField struct{ json, attr string }

// The prompt fields of each route.
var (
	chatPromptFields      = []promptField{{"messages", tracing.AttrInputMessages}}
	responsesPromptFields = []promptField{{"instructions", tracing.AttrSystemInstructions}, {"input", tracing.AttrInputMessages}}
	// messagesPromptFields is for the Messages route: its system prompt and messages.
	messagesPromptFields = []promptField{{"system", tracing.AttrSystemInstructions}, {"messages", tracing.AttrInputMessages}}
)

// untracedRoutes are probes and scrapes: a span each would drown the traces that matter.
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
	ctx, span := s.tracer.StartServer(c.Request.Context(), c.Request, route)
	c.Request = c.Request.WithContext(ctx)
	ri.trace = &traceState{span: span, contentMax: s.tracer.ContentMax()}
}

// recording returns the trace state of a request whose span is sampled, or nil: attribute
// work is skipped for spans nobody will see.
func (ri *requestInfo) recording() *traceState {
	if ri.trace == nil || !ri.trace.span.IsRecording() {
		return nil
	}
	return ri.trace
}

// traceRequest notes a GenAI request for the span: the model the client named, the output
// cap it asked for (0 if none), and, read from body, its temperature and (when content
// capture is on) its prompt fields. The chat, Responses and Messages handlers call it once
// the request is checked; it does nothing when the request is not traced.
//
//go:noinline
func (ri *requestInfo) traceRequest(model string, maxTokens int64, body []byte, prompt []promptField) {
	ts := ri.recording()
	if ts == nil {
		return
	}
	g := &tracing.GenAI{Operation: tracing.OperationChat, RequestModel: model, MaxTokens: maxTokens}
	if t := gjson.GetBytes(body, "temperature"); t.Type == gjson.Number {
		g.Temperature, g.HasTemperature = t.Num, true
	}
	ts.mu.Lock()
	ts.genai = g
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
//
//go:noinline
func (ri *requestInfo) traceAnswer(obj []byte) {
	ts := ri.recording()
	if ts == nil {
		return
	}
	f := gjson.GetManyBytes(obj, "id", "model", "status", "incomplete_details.reason", "output")
	reason := finishReason(f[2].Str, f[3].Str, f[4])
	ts.mu.Lock()
	if g := ts.genai; g != nil {
		if g.ResponseID == "" {
			g.ResponseID = f[0].Str
		}
		if g.ResponseModel == "" {
			g.ResponseModel = f[1].Str
		}
		if reason != "" {
			g.FinishReasons = append(g.FinishReasons, reason)
		}
	}
	ts.mu.Unlock()
	if ts.contentMax > 0 && f[4].Exists() {
		tracing.RecordContent(ts.span, tracing.EventCompletion, tracing.AttrOutputMessages, f[4].Raw, ts.contentMax)
	}
}

// traceEvent looks at one upstream stream event for the span: a terminal event carries the
// whole response.
//
//go:noinline
func (ri *requestInfo) traceEvent(typ string, data []byte) {
	if typ == "" {
		typ = gjson.GetBytes(data, "type").Str
	}
	switch typ {
	case "response.completed", "response.incomplete", "response.failed":
		if r := gjson.GetBytes(data, "response"); r.IsObject() {
			ri.traceAnswer([]byte(r.Raw))
		}
	}
}

// finishReason names how a Responses answer ended in the chat vocabulary the conventions'
// examples use: stop, length, content_filter, tool_calls, error.
func finishReason(status, incomplete string, output gjson.Result) string {
	switch status {
	case "completed":
		calls := false
		output.ForEach(func(_, item gjson.Result) bool {
			switch item.Get("type").Str {
			case "function_call", "custom_tool_call":
				calls = true
			}
			return !calls
		})
		if calls {
			return "tool_calls"
		}
		return "stop"
	case "incomplete":
		switch incomplete {
		case "max_output_tokens":
			return "length"
		case "":
			return "incomplete"
		}
		return incomplete
	case "failed":
		return "error"
	}
	return status
}

// endTrace records the request's outcome and ends its span; sum gains the trace id the
// access log carries.
//
//go:noinline
func (s *Server) endTrace(ri *requestInfo, sum *RequestSummary) {
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
	tracing.EndServer(ts.span, tracing.Outcome{
		RequestID: sum.RequestID, Status: sum.Status, Team: sum.Team, KeyName: sum.Key,
		Attempts: sum.Attempts, LimitDecision: ts.limitDecision, LimitReason: sum.Refusal,
		Stream: sum.Stream, TTFB: sum.TTFB,
		EventsReceived: ts.eventsReceived, EventsSent: ts.eventsSent,
		ErrorCode: sum.ErrorCode, UpstreamError: sum.UpstreamErr, ClientGone: ri.clientGone,
	}, g)
}

// startAttempt opens the client span of one upstream attempt.
//
//go:noinline
func (s *Server) startAttempt(ctx context.Context) (context.Context, trace.Span) {
	return s.tracer.StartAttempt(ctx)
}

// sendAttempt puts the attempt span's context on its request (traceparent, and the caller's
// tracestate).
//
//go:noinline
func (s *Server) sendAttempt(ctx context.Context, req *http.Request) {
	s.tracer.Inject(ctx, req.Header)
}

// endAttempt closes an attempt that will not be relayed: retried, or failed without an answer.
//
//go:noinline
func endAttempt(span trace.Span, req *http.Request, n int, resp *http.Response, err error) {
	a := tracing.Attempt{Request: req, N: n}
	if resp != nil {
		a.Status = resp.StatusCode
	}
	if err != nil {
		a.ErrKind = upstreamErrorKind(err)
	}
	tracing.EndAttempt(span, a)
}

// finalAttempt ends the span of an attempt that failed for good, or hands it to the answer
// the caller will read: it ends when that answer is closed, so a stream's attempt span lasts
// as long as the stream.
//
//go:noinline
func finalAttempt(span trace.Span, req *http.Request, n int, resp *http.Response, err error) {
	if err != nil || resp == nil {
		endAttempt(span, req, n, resp, err)
		return
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span, attempt: tracing.Attempt{Request: req, N: n, Status: resp.StatusCode}}
}

// spanBody ends an attempt's span when the answer it carries is closed.
type spanBody struct {
	io.ReadCloser
	span    trace.Span
	attempt tracing.Attempt
	once    atomic.Bool
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	if b.once.CompareAndSwap(false, true) {
		tracing.EndAttempt(b.span, b.attempt)
	}
	return err
}

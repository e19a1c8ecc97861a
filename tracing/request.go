package tracing

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"
)

// Request is one traced request: its server span and what the routes learn of it while it
// runs, put on the span in one call when it ends. A route tells it, in any order:
//   - Call, once the request is checked and its upstream body is known;
//   - Answer, for the platform's answer (a non-stream body or a stream's terminal event),
//     once per choice of an n>1 chat call;
//   - EventReceived and EventSent, for each upstream event read and each write to the client;
//   - Limited, with the limiter's decision;
//   - End, once, with how the request ended.
//
// Call and Answer are told strings the caller has already bounded and made printable (the
// caller bounds what it logs the same way); Request copies what it keeps.
type Request struct {
	span       trace.Span
	route      string     // the route the span was started with
	contentMax int        // 0: prompts and completions are not captured
	open       *openCount // the Tracer's count of requests not yet ended

	mu        sync.Mutex // the choices of an n>1 chat call report their answers in parallel
	genai     *GenAI     // &genaiData once Call said this is a GenAI call
	genaiData GenAI

	// The upstream events a stream read (n>1 chat streams read in parallel) and the writes
	// of events to the client.
	eventsReceived, eventsSent atomic.Int64
	limitDecision              string // "allowed" or "refused" once the limiter was asked
}

// openCount is how many of a Tracer's requests have not ended their span yet.
type openCount struct{ n atomic.Int64 }

// StartRequest starts the server span of one incoming request (see StartServer), continuing
// the caller's trace. The span stays out of the returned Request's context: the one place a
// child needs it, the attempt spans, is given it as their parent (Span).
func (t *Tracer) StartRequest(ctx context.Context, r *http.Request, route string) *Request {
	_, span := t.StartServer(ctx, r, route)
	t.open.n.Add(1)
	return &Request{span: span, route: route, contentMax: t.contentMax, open: &t.open}
}

// WaitEnded waits until every request this Tracer started has ended, or ctx ends. After a
// drain that timed out and closed the remaining connections, their handlers still have to
// notice and end their spans before the last export. A nil Tracer has none to wait for.
func (t *Tracer) WaitEnded(ctx context.Context) {
	if t == nil {
		return
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for t.open.n.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Span is the request's server span, the parent of its attempts' spans.
func (q *Request) Span() trace.Span { return q.span }

// Recording reports whether the span is sampled: work for attributes nobody will see is
// skipped, and a caller may skip what it would prepare for them.
func (q *Request) Recording() bool { return q.span.IsRecording() }

// promptFields are the prompt of a Responses body, with the attribute each is captured in.
// Every GenAI route sends the platform a Responses body, so this is every route's prompt.
var promptFields = [...]struct{ json, attr string }{
	{"instructions", AttrSystemInstructions},
	{"input", AttrInputMessages},
}

// Call notes the model call the request makes: model is the one the client asked for
// (bounded by the caller), maxTokens the output cap (0: none), and body the Responses body
// sent upstream, which gives the temperature and, when content is captured, the prompt.
func (q *Request) Call(model string, maxTokens int64, body []byte) {
	if !q.Recording() {
		return
	}
	temp := gjson.GetBytes(body, "temperature")
	q.mu.Lock()
	q.genaiData = GenAI{Operation: OperationChat, RequestModel: strings.Clone(model), MaxTokens: maxTokens}
	if temp.Type == gjson.Number {
		q.genaiData.Temperature, q.genaiData.HasTemperature = temp.Num, true
	}
	q.genai = &q.genaiData
	q.mu.Unlock()
	if q.contentMax > 0 {
		for _, f := range promptFields {
			if r := gjson.GetBytes(body, f.json); r.Exists() {
				RecordContent(q.span, EventPrompt, f.attr, r.Raw, q.contentMax)
			}
		}
	}
}

// Answer is what the span keeps of one platform answer. Its strings may be views of a
// buffer that is reused once Answer returns.
type Answer struct {
	ID, Model    string // bounded by the caller
	FinishReason string // the conventions' (stop, length, ...), another bounded by the caller, or ""
	Output       string // the answer's output as raw JSON, captured (capped) when content is
}

// Answer notes the platform's answer. The first answer's id and model name the response;
// each answer adds its finish reason.
func (q *Request) Answer(a Answer) {
	if !q.Recording() {
		return
	}
	q.mu.Lock()
	if g := q.genai; g != nil {
		if g.ResponseID == "" {
			g.ResponseID = strings.Clone(a.ID)
		}
		if g.ResponseModel == "" {
			g.ResponseModel = strings.Clone(a.Model)
		}
		if a.FinishReason != "" {
			g.FinishReasons = append(g.FinishReasons, keptReason(a.FinishReason))
		}
	}
	q.mu.Unlock()
	if q.contentMax > 0 && a.Output != "" {
		RecordContent(q.span, EventCompletion, AttrOutputMessages, a.Output, q.contentMax)
	}
}

// keptReason is a finish reason the span may keep: the usual ones are constants, another
// is copied out of the view it came in.
func keptReason(r string) string {
	switch r {
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "tool_calls":
		return "tool_calls"
	}
	return strings.Clone(r)
}

// EventReceived counts one upstream stream event.
func (q *Request) EventReceived() { q.eventsReceived.Add(1) }

// EventSent counts one write of events that reached the client.
func (q *Request) EventSent() { q.eventsSent.Add(1) }

// Limited notes the limiter's decision on the request.
func (q *Request) Limited(allowed bool) {
	q.limitDecision = "refused"
	if allowed {
		q.limitDecision = "allowed"
	}
}

// End records how the request ended and ends its span, once. o's Route, LimitDecision and
// event counts are the Request's own; what o gives for them is replaced. It returns the
// trace id (hex) the request's log line carries, "" when the span has none.
func (q *Request) End(o Outcome) (traceID string) {
	if sc := q.span.SpanContext(); sc.HasTraceID() {
		traceID = sc.TraceID().String()
	}
	o.Route, o.LimitDecision = q.route, q.limitDecision
	o.EventsReceived, o.EventsSent = q.eventsReceived.Load(), q.eventsSent.Load()
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.genai
	if g != nil {
		g.InputTokens, g.OutputTokens = o.InputTokens, o.OutputTokens
	}
	EndServer(q.span, o, g)
	q.open.n.Add(-1)
	return traceID
}

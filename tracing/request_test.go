package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// newRequestTracer is a Tracer exporting to memory, capturing content up to contentMax
// bytes (0: off).
func newRequestTracer(t testing.TB, contentMax int) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := NewWithExporter(context.Background(), exp, Options{CaptureContent: contentMax > 0, ContentMaxBytes: contentMax, Getenv: envOf()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

// endedSpan flushes tr and returns the one span it exported.
func endedSpan(t testing.TB, tr *Tracer, exp *tracetest.InMemoryExporter) tracetest.SpanStub {
	t.Helper()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	return spans[0]
}

func attrsOf(s tracetest.SpanStub) map[string]attribute.Value {
	m := make(map[string]attribute.Value, len(s.Attributes))
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// unsafeString is a view of b, as the proxy hands the Request views of its read buffers.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func incoming(traceparent string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	if traceparent != "" {
		r.Header.Set("traceparent", traceparent)
	}
	return r
}

// What the routes tell a Request reaches its span when it ends, alongside the outcome.
func TestRequestRecordsWhatRoutesLearn(t *testing.T) {
	body := []byte(`{"model":"m","instructions":"be brief","input":"hello","temperature":0.5}`)
	cases := []struct {
		name       string
		contentMax int
		tell       func(q *Request)
		out        Outcome
		want       map[string]any // attribute: value; nil value: absent
		events     []string
	}{
		{
			name: "not_genai", tell: func(*Request) {}, out: Outcome{Method: "GET", Status: 200},
			want: map[string]any{AttrRequestModel: nil, AttrOperationName: nil, "http.route": "/v1/chat/completions",
				AttrLimitDecision: nil, AttrInputTokens: nil},
		},
		{
			name: "call_and_answer",
			tell: func(q *Request) {
				q.Call("m", 64, body)
				q.Answer(Answer{ID: "resp_1", Model: "m-2026", FinishReason: "stop", Output: `[{"type":"message"}]`})
				q.Answer(Answer{ID: "resp_2", Model: "other", FinishReason: "length"})
				q.Limited(true)
			},
			out: Outcome{Status: 200, InputTokens: 3, OutputTokens: 5},
			want: map[string]any{AttrRequestModel: "m", AttrMaxTokens: int64(64), AttrTemperature: 0.5,
				AttrResponseID: "resp_1", AttrResponseModel: "m-2026", AttrFinishReasons: []string{"stop", "length"},
				AttrInputTokens: int64(3), AttrOutputTokens: int64(5), AttrLimitDecision: "allowed"},
		},
		{
			name: "content_captured", contentMax: 8,
			tell: func(q *Request) {
				q.Call("m", 0, body)
				q.Answer(Answer{Output: `[{"type":"message"}]`})
			},
			want:   map[string]any{AttrMaxTokens: nil, AttrTemperature: 0.5},
			events: []string{EventPrompt, EventPrompt, EventCompletion},
		},
		{
			name: "stream_refused",
			tell: func(q *Request) {
				q.Limited(false)
				q.EventReceived()
				q.EventReceived()
				q.EventSent()
			},
			// What the outcome says of the route, decision and counts is the Request's.
			out: Outcome{Status: 429, Stream: true, Route: "/elsewhere", LimitDecision: "x", EventsSent: 9},
			want: map[string]any{AttrLimitDecision: "refused", AttrEventsReceived: int64(2), AttrEventsSent: int64(1),
				"http.route": "/v1/chat/completions", AttrStream: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, exp := newRequestTracer(t, tc.contentMax)
			q := tr.StartRequest(context.Background(), incoming(""), "/v1/chat/completions")
			tc.tell(q)
			id := q.End(tc.out)
			span := endedSpan(t, tr, exp)
			if id == "" || id != span.SpanContext.TraceID().String() {
				t.Errorf("End returned trace id %q; the span's is %s", id, span.SpanContext.TraceID())
			}
			got := attrsOf(span)
			for k, want := range tc.want {
				v, ok := got[k]
				switch {
				case want == nil && ok:
					t.Errorf("%s = %v, want it absent", k, v.Emit())
				case want != nil && !ok:
					t.Errorf("%s absent, want %v", k, want)
				case want != nil:
					if fmt.Sprint(v.AsInterface()) != fmt.Sprint(want) {
						t.Errorf("%s = %v, want %v", k, v.Emit(), want)
					}
				}
			}
			var events []string
			for _, e := range span.Events {
				events = append(events, e.Name)
				for _, kv := range e.Attributes {
					if kv.Value.Type() == attribute.STRING && len(kv.Value.AsString()) > tc.contentMax {
						t.Errorf("event %s holds %d bytes, over the cap %d", e.Name, len(kv.Value.AsString()), tc.contentMax)
					}
				}
			}
			if strings.Join(events, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %v, want %v", events, tc.events)
			}
		})
	}
}

// What Call and Answer are told may be views of buffers reused once they return: the span
// keeps copies.
func TestRequestCopiesWhatItKeeps(t *testing.T) {
	tr, exp := newRequestTracer(t, 0)
	q := tr.StartRequest(context.Background(), incoming(""), "/v1/responses")
	buf := []byte("model-a resp_abc model-b paused stop")
	view := func(from, to int) string { return string(buf[from:to]) }
	unsafeView := func(from, to int) string { return unsafeString(buf[from:to]) }
	q.Call(unsafeView(0, 7), 0, nil)
	q.Answer(Answer{ID: unsafeView(8, 16), Model: unsafeView(17, 24), FinishReason: unsafeView(25, 31)})
	q.Answer(Answer{FinishReason: unsafeView(32, 36)})
	want := map[string]string{AttrRequestModel: view(0, 7), AttrResponseID: view(8, 16), AttrResponseModel: view(17, 24),
		AttrFinishReasons: "[" + view(25, 31) + " " + view(32, 36) + "]"}
	for i := range buf {
		buf[i] = 'X'
	}
	q.End(Outcome{Status: 200})
	got := attrsOf(endedSpan(t, tr, exp))
	for k, want := range want {
		if g := fmt.Sprint(got[k].AsInterface()); g != want {
			t.Errorf("%s = %q after its buffer was reused, want %q", k, g, want)
		}
	}
}

// A span the sampler dropped records nothing, yet its Request still ends and is counted.
func TestRequestNotSampled(t *testing.T) {
	tr, exp := newRequestTracer(t, 64)
	q := tr.StartRequest(context.Background(), incoming("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"), "/v1/responses")
	if q.Recording() {
		t.Fatal("a request whose caller said not sampled is recording")
	}
	q.Call("m", 1, []byte(`{"input":"secret"}`))
	q.Answer(Answer{ID: "r", Output: "[1]"})
	q.End(Outcome{Status: 200})
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported for a request not sampled", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tr.WaitEnded(ctx)
	if ctx.Err() != nil {
		t.Error("WaitEnded still waits for a request that ended")
	}
}

// WaitEnded waits for the requests not yet ended, and no longer than its context.
func TestWaitEnded(t *testing.T) {
	var off *Tracer
	off.WaitEnded(context.Background()) // tracing off: nothing to wait for
	tr, _ := newRequestTracer(t, 0)
	q := tr.StartRequest(context.Background(), incoming(""), "/v1/responses")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	tr.WaitEnded(ctx)
	if ctx.Err() == nil {
		t.Fatal("WaitEnded returned while a request was open")
	}
	done := make(chan struct{})
	go func() {
		tr.WaitEnded(context.Background())
		close(done)
	}()
	q.End(Outcome{Status: 200})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitEnded did not return once the request ended")
	}
}

// Call reads the body a client shaped: whatever it holds, reading it must not panic, and
// what is captured of it stays within the cap and valid UTF-8 where the body was.
func FuzzRequestCall(f *testing.F) {
	f.Add([]byte(`{"model":"m","instructions":"be brief","input":[{"role":"user","content":"hi"}],"temperature":1}`))
	f.Add([]byte(`{"temperature":"hot","input":"` + strings.Repeat("é", 40) + `"}`))
	f.Add([]byte(`{"input":`))
	f.Add([]byte(`not json`))
	const capBytes = 16
	tr, exp := newRequestTracer(f, capBytes)
	f.Fuzz(func(t *testing.T, body []byte) {
		exp.Reset()
		q := tr.StartRequest(context.Background(), incoming(""), "/v1/responses")
		q.Call("m", 0, body)
		q.End(Outcome{Status: 200})
		for _, e := range endedSpan(t, tr, exp).Events {
			for _, kv := range e.Attributes {
				if s := kv.Value.AsString(); kv.Value.Type() == attribute.STRING && len(s) > capBytes {
					t.Fatalf("%s holds %d bytes, over the cap %d", kv.Key, len(s), capBytes)
				} else if utf8.Valid(body) && !utf8.ValidString(s) {
					t.Fatalf("%s cut a character: %q", kv.Key, s)
				}
			}
		}
	})
}

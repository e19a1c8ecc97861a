// Package tracingtest is an in-process OTLP/HTTP trace receiver for tests: it decodes the
// protobuf exports modelgate sends and keeps the spans, so a test can read what a tracing
// backend would see.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one exported span, decoded.
type Span struct {
	Resource      map[string]any
	TraceID       string // hex
	SpanID        string
	ParentSpanID  string // "" for a root span
	TraceState    string
	Name          string
	Kind          tracepb.Span_SpanKind
	Attrs         map[string]any // string, int64, float64, bool or []any
	Events        []Event
	StatusCode    tracepb.Status_StatusCode
	StatusMessage string
	Start, End    time.Time
}

// Event is one span event.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Receiver serves POST /v1/traces as an OTLP/HTTP collector does.
type Receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []Span
	requests int
	bad      []string    // why an export could not be decoded
	header   http.Header // of the last export
}

// NewReceiver starts a receiver that stops when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base address, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) URL() string { return r.srv.URL }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	// The exporter's transport is shared and never closes its idle connections; closing
	// each one after its answer leaves no goroutine behind for a test's leak check.
	w.Header().Set("Connection", "close")
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail("gzip: " + err.Error())
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		r.fail("read: " + err.Error())
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var msg collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		r.fail("decode: " + err.Error())
		http.Error(w, "bad protobuf", http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, decode(res, s))
			}
		}
	}
	r.mu.Lock()
	r.requests++
	r.spans = append(r.spans, got...)
	r.header = req.Header.Clone()
	r.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) fail(why string) {
	r.mu.Lock()
	r.bad = append(r.bad, why)
	r.mu.Unlock()
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests counts the exports received, decodable or not.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests + len(r.bad)
}

// Header is the header of the last export received.
func (r *Receiver) Header() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header.Clone()
}

// Errors lists the exports that could not be decoded.
func (r *Receiver) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

// WaitFor polls the received spans until cond holds or d passes, and returns the last look.
// flush, when set, runs before each look (a tracer's ForceFlush).
func (r *Receiver) WaitFor(d time.Duration, flush func(), cond func([]Span) bool) ([]Span, bool) {
	deadline := time.Now().Add(d)
	for {
		if flush != nil {
			flush()
		}
		spans := r.Spans()
		if cond(spans) {
			return spans, true
		}
		if time.Now().After(deadline) {
			return spans, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func decode(res map[string]any, s *tracepb.Span) Span {
	out := Span{
		Resource: res, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		TraceState: s.GetTraceState(), Name: s.GetName(), Kind: s.GetKind(), Attrs: attrs(s.GetAttributes()),
		StatusCode: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
		Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
	}
	if p := s.GetParentSpanId(); len(p) > 0 {
		out.ParentSpanID = hex.EncodeToString(p)
	}
	for _, e := range s.GetEvents() {
		out.Events = append(out.Events, Event{Name: e.GetName(), Attrs: attrs(e.GetAttributes())})
	}
	return out
}

func attrs(kvs []*common.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *common.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_IntValue:
		return x.IntValue
	case *common.AnyValue_DoubleValue:
		return x.DoubleValue
	case *common.AnyValue_BoolValue:
		return x.BoolValue
	case *common.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *common.AnyValue_BytesValue:
		return x.BytesValue
	}
	return nil
}

// Find returns the spans of kind k named name.
func Find(spans []Span, k tracepb.Span_SpanKind, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Kind == k && (name == "" || s.Name == name) {
			out = append(out, s)
		}
	}
	return out
}

// Kinds, re-exported so tests need not import the protobuf package.
const (
	Server = tracepb.Span_SPAN_KIND_SERVER
	Client = tracepb.Span_SPAN_KIND_CLIENT
)

// StatusError is the error status code.
const StatusError = tracepb.Status_STATUS_CODE_ERROR

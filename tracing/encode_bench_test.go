package tracing

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkEncodeRequest encodes a full default batch (512 spans) shaped like modelgate's: a
// traced chat request's server span with its GenAI attributes and one attempt span each.
// ns/op divided by 512 is the export's encoding cost per span.
//
//	go test ./tracing -run '^$' -bench EncodeRequest -benchmem
func BenchmarkEncodeRequest(b *testing.B) {
	res := resource.NewSchemaless(attribute.String("service.name", "modelgate"), attribute.String("service.version", "bench"))
	scope := instrumentation.Scope{Name: "modelgate"}
	start := time.Unix(1700000000, 0)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	g := &GenAI{RequestModel: "bench", ResponseID: "resp_0123456789abcdef", ResponseModel: "bench-2026",
		FinishReasons: []string{"stop"}, InputTokens: 12, OutputTokens: 34, MaxTokens: 256, Temperature: 0.5, HasTemperature: true}
	server := AppendGenAI(nil, g)
	server = append(server,
		attribute.String("http.request.method", "POST"), attribute.String("http.route", "/v1/chat/completions"),
		attribute.String(AttrRequestID, "req_0123456789abcdef01234567"), attribute.Int("http.response.status_code", 200),
		attribute.String(AttrTeam, "alpha"), attribute.String(AttrKeyName, "alpha-1"), attribute.Int(AttrAttempts, 1),
		attribute.String(AttrLimitDecision, "allowed"), attribute.Float64(AttrTTFB, 0.0123))
	client := []attribute.KeyValue{attribute.Int(AttrAttempt, 1), attribute.String("http.request.method", "POST"),
		attribute.String("url.path", "/v1/responses"), attribute.String("server.address", "platform.example"),
		attribute.Int("server.port", 8443), attribute.Int("http.response.status_code", 200)}
	var stubs tracetest.SpanStubs
	for i := 0; i < 256; i++ {
		stubs = append(stubs,
			tracetest.SpanStub{Name: "POST /v1/chat/completions", SpanContext: sc, SpanKind: trace.SpanKindServer,
				StartTime: start, EndTime: start.Add(time.Millisecond), Attributes: server, Resource: res, InstrumentationScope: scope},
			tracetest.SpanStub{Name: "POST /v1/responses", SpanContext: sc, Parent: sc, SpanKind: trace.SpanKindClient,
				StartTime: start, EndTime: start.Add(time.Millisecond), Attributes: client, Resource: res, InstrumentationScope: scope})
	}
	spans := stubs.Snapshots()
	var ro []sdktrace.ReadOnlySpan = spans
	var e encoder
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out = e.encodeRequest(out[:0], ro)
	}
	b.ReportMetric(float64(len(out))/float64(len(ro)), "bytes/span")
}

package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"modelgate/apitest"
)

// BenchmarkRequestSpans is what tracing adds to one traced request, on its own: a server span
// (no caller traceparent), one upstream attempt span with traceparent injected, both ended
// with the attributes a chat request gets, and their export through the SDK's batcher and
// the real exporter to a collector in the process that reads and drops each export.
// cpu-ns/op is the process's CPU per request, the batcher's and the collector's included.
//
//	go test ./tracing -run '^$' -bench RequestSpans -benchmem -count 5
func BenchmarkRequestSpans(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer collector.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	b.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", "1.0")
	tr, err := New(context.Background(), Options{Version: "bench"})
	if err != nil || tr == nil {
		b.Fatalf("New = %v, %v", tr, err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	in, _ := http.NewRequest(http.MethodPost, "http://gateway.example/v1/chat/completions", nil)
	g := GenAI{Operation: OperationChat, RequestModel: "bench", MaxTokens: 256, ResponseID: "resp_0123456789abcdef",
		ResponseModel: "bench-2026", FinishReasons: []string{"stop"}, InputTokens: 12, OutputTokens: 34}
	b.ReportAllocs()
	report := apitest.CPUPerOp(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, span := tr.StartServer(context.Background(), in, "/v1/chat/completions")
			actx, aspan := tr.StartAttempt(ctx)
			up, _ := http.NewRequest(http.MethodPost, "http://platform.example:8443/v1/responses", nil)
			tr.Inject(actx, up.Header)
			tr.EndAttempt(aspan, Attempt{Request: up, N: 1, Status: 200})
			gg := g
			EndServer(span, Outcome{RequestID: "req_0123456789abcdef01234567", Status: 200, Team: "alpha", KeyName: "alpha-1",
				Attempts: 1, LimitDecision: "allowed", TTFB: 12 * time.Millisecond}, &gg)
		}
	})
	_ = tr.ForceFlush(context.Background())
	b.StopTimer()
	report()
}

// BenchmarkSDKFloor is the OpenTelemetry SDK's own price for the spans of one traced request,
// with none of modelgate's code: a server span with 20 attributes and a client span with 7
// (what a chat request records), started, ended, batched by the SDK's batcher with
// modelgate's batch sizes and handed to an exporter that drops them. No integration of the
// SDK can cost less; BenchmarkRequestSpans is modelgate's, export encoding included.
//
//	go test ./tracing -run '^$' -bench SDKFloor -benchmem -count 5
func BenchmarkSDKFloor(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(dropExporter{}, sdktrace.WithMaxQueueSize(4096), sdktrace.WithMaxExportBatchSize(2048)))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := tp.Tracer("bench")
	server := make([]attribute.KeyValue, 20)
	for i := range server {
		server[i] = attribute.String("bench.server."+strconv.Itoa(i), "value")
	}
	client := make([]attribute.KeyValue, 7)
	for i := range client {
		client[i] = attribute.Int("bench.client."+strconv.Itoa(i), i)
	}
	b.ReportAllocs()
	report := apitest.CPUPerOp(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, span := tr.Start(context.Background(), "chat bench", trace.WithSpanKind(trace.SpanKindServer))
			_, attempt := tr.Start(ctx, "POST /v1/responses", trace.WithSpanKind(trace.SpanKindClient))
			attempt.SetAttributes(client...)
			attempt.End()
			span.SetAttributes(server...)
			span.End()
		}
	})
	_ = tp.ForceFlush(context.Background())
	b.StopTimer()
	report()
}

type dropExporter struct{}

func (dropExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropExporter) Shutdown(context.Context) error                             { return nil }

package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
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
	cpu0 := rusageCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, span := tr.StartServer(context.Background(), in, "/v1/chat/completions")
			actx, aspan := tr.StartAttempt(ctx)
			up, _ := http.NewRequest(http.MethodPost, "http://platform.example:8443/v1/responses", nil)
			tr.Inject(actx, up.Header)
			EndAttempt(aspan, Attempt{Request: up, N: 1, Status: 200})
			gg := g
			EndServer(span, Outcome{RequestID: "req_0123456789abcdef01234567", Status: 200, Team: "alpha", KeyName: "alpha-1",
				Attempts: 1, LimitDecision: "allowed", TTFB: 12 * time.Millisecond}, &gg)
		}
	})
	_ = tr.ForceFlush(context.Background())
	b.StopTimer()
	b.ReportMetric(float64(rusageCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

func rusageCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

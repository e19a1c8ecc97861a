package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"modelgate/apitest"
	"modelgate/tracing"
)

// BenchmarkTracing is the tracing cost pair: the same requests through a real loopback HTTP
// server, with parallel keep-alive clients, with tracing off and with tracing on at a
// sample ratio of 1.0, exporting over OTLP/HTTP (the real exporter, default batching) to a
// collector in the process that reads and drops the exports. The upstream is the canned
// platform of the other benchmarks. Compare .../on with .../off of the same case: ns/op is
// wall time per request with two clients at work, cpu-ns/op the process's CPU time per
// request (the client's and the collector's included), the steadier figure on a shared box:
//
//	go test ./proxy -run '^$' -bench 'BenchmarkTracing' -benchtime 20000x -count 5
func BenchmarkTracing(b *testing.B) {
	minimal := benchUpstream(b, "")
	const msgs = `"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]`
	cases := []struct{ name, path, body string }{
		{"responses", "/v1/responses", `{"model":"bench","input":"Write one short sentence about benchmarks."}`},
		{"responses_stream", "/v1/responses", `{"model":"bench","input":"Write one short sentence about benchmarks.","stream":true}`},
		{"chat", "/v1/chat/completions", `{"model":"bench",` + msgs + `}`},
		{"chat_stream", "/v1/chat/completions", `{"model":"bench","stream":true,` + msgs + `}`},
	}
	for _, c := range cases {
		for _, mode := range []string{"off", "on"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				var tracer *tracing.Tracer
				if mode == "on" {
					tracer = benchTracer(b)
				}
				front := httptest.NewServer(newTracedBenchServer(b, minimal, tracer))
				defer front.Close()
				benchParallel(b, front.URL+c.path, c.body)
				if tracer != nil {
					// The export of what is still queued is part of the cost.
					_ = tracer.ForceFlush(context.Background())
				}
			})
		}
	}
}

// benchTracer exports at ratio 1.0 to a collector that reads each export and drops it.
func benchTracer(b *testing.B) *tracing.Tracer {
	b.Helper()
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(collector.Close)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	b.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", "1.0")
	tr, err := tracing.New(context.Background(), tracing.Options{Version: "bench"})
	if err != nil || tr == nil {
		b.Fatalf("tracing.New = %v, %v", tr, err)
	}
	b.Cleanup(func() {
		_ = tr.Shutdown(context.Background())
		if b.N > 1000 && exports.Load() == 0 {
			b.Error("tracing on exported nothing")
		}
	})
	return tr
}

// benchParallel posts body to url from GOMAXPROCS clients until b.N requests are done.
func benchParallel(b *testing.B, url, body string) {
	b.Helper()
	payload := []byte(body)
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	defer tr.CloseIdleConnections()
	b.ReportAllocs()
	report := apitest.CPUPerOp(b)
	b.ResetTimer()
	defer func() {
		b.StopTimer()
		report()
	}()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
			req.Header.Set("Authorization", "Bearer mg-bench-key-1")
			req.Header.Set("Content-Type", "application/json")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || n < 100 {
				b.Errorf("status %d, %d bytes", resp.StatusCode, n)
				return
			}
		}
	})
}

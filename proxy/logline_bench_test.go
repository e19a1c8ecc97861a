package proxy

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"modelgate/reqlog"
)

// BenchmarkLogRequest is the access log's line of a finished request, with and without the
// attribution fields (end_user, tags), in both log formats (text as the binary writes it,
// through reqlog.TextHandler's fast path, and through slog's own text handler for
// comparison): what they add to every recorded request's line.
func BenchmarkLogRequest(b *testing.B) {
	base := reqlog.RequestSummary{RequestID: "req_0123456789abcdef", Route: "/v1/responses", Method: "POST",
		Team: "bench", Key: "bench-key", Model: "bench", Status: 200, Duration: 1500 * time.Microsecond,
		InputTokens: 12, OutputTokens: 20, InputReserved: 40, Attempts: 1}
	attributed := base
	attributed.EndUser, attributed.Tags = "end-user-4711", "customer:acme,experiment:b,feature:search"
	for _, format := range []struct {
		name    string
		handler slog.Handler
	}{{"text", reqlog.NewTextHandler(io.Discard, nil)}, {"slogtext", slog.NewTextHandler(io.Discard, nil)}, {"json", slog.NewJSONHandler(io.Discard, nil)}} {
		for _, tc := range []struct {
			name string
			sum  reqlog.RequestSummary
		}{{"none", base}, {"attributed", attributed}} {
			b.Run(format.name+"/"+tc.name, func(b *testing.B) {
				s := &Server{log: slog.New(format.handler)}
				b.ReportAllocs()
				for b.Loop() {
					s.logRequest(tc.sum)
				}
			})
		}
	}
}

package platform

import (
	"bytes"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkRoundTrip is one short non-stream call through the transport main builds, over
// HTTP/1.1 (upstream.http2 off) and over HTTP/2 (auto) to the same TLS platform in the
// process: a 75-byte body out, a 740-byte answer back, 8 calls at a time, as wrk -c32 drives
// a small Responses call. It shows what net/http's HTTP/2 client adds per call to the HTTP/1.1
// path: a goroutine per stream, header and body written as two TLS records, HPACK, the
// stream's pipe (docs/performance.md, "HTTP/1.1 against HTTP/2").
func BenchmarkRoundTrip(b *testing.B) {
	for _, mode := range []string{"off", "auto"} {
		b.Run("http2="+mode, func(b *testing.B) {
			benchRoundTrips(b, TransportOptions{HTTP2: mode, ResponseHeaderTimeout: time.Minute})
		})
	}
}

func benchRoundTrips(b *testing.B, opts TransportOptions) {
	answer := bytes.Repeat([]byte("x"), 740)
	body := bytes.Repeat([]byte("y"), 75)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Write(answer)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	opts.RootCAs = x509.NewCertPool()
	opts.RootCAs.AddCert(srv.Certificate())
	cl, err := New(srv.URL, srv.URL, NewTransport(opts))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	b.ReportAllocs()
	b.SetParallelism(4) // x GOMAXPROCS callers
	b.RunParallel(func(pb *testing.PB) {
		var answerBuf bytes.Buffer
		for pb.Next() {
			req, err := cl.NewGatewayRequest(b.Context(), Call{Method: http.MethodPost, Path: ResponsesPath, Body: body,
				ContentType: "application/json", Key: "sk-bench", RequestID: "req_0123456789abcdef0123456789abcdef"})
			if err != nil {
				b.Fatal(err)
			}
			resp, err := cl.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			answerBuf.Reset()
			answerBuf.ReadFrom(resp.Body)
			resp.Body.Close()
			if (resp.ProtoMajor == 2) != (opts.HTTP2 == "auto") || answerBuf.Len() != len(answer) {
				b.Fatalf("got %s, %d bytes", resp.Proto, answerBuf.Len())
			}
		}
	})
}

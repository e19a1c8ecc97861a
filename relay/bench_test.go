package relay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sse "github.com/tmaxmax/go-sse"

	"modelgate/platformsim"
)

// BenchmarkEventScanner reads sim-long's 200-delta stream, one event per Read as it arrives
// from a socket, with modelgate's EventReader and with go-sse's reader, the design card's SSE
// library. Both see every event's type and data; only EventReader also keeps each event's
// bytes as received (the Responses passthrough forwards those unaltered) and flags lines
// that are not SSE. bench/README.md records the result that keeps EventReader.
func BenchmarkEventScanner(b *testing.B) {
	stream := simStream(b, "sim-long")
	events := bytes.Count(stream, []byte("\n\n"))
	b.Run("EventReader", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			er := NewEventReader(&eventByEvent{b: stream}, MaxEventSize)
			n := 0
			for {
				ev, err := er.Next()
				if err != nil {
					break
				}
				if ev.Type != "" && len(ev.Data) > 0 {
					n++
				}
			}
			er.Release()
			if n != events {
				b.Fatalf("read %d events of %d", n, events)
			}
		}
	})
	b.Run("go-sse", func(b *testing.B) {
		cfg := &sse.ReadConfig{MaxEventSize: MaxEventSize}
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for ev, err := range sse.Read(io.Reader(&eventByEvent{b: stream}), cfg) {
				if err != nil {
					break
				}
				if ev.Type != "" && len(ev.Data) > 0 {
					n++
				}
			}
			if n != events {
				b.Fatalf("read %d events of %d", n, events)
			}
		}
	})
}

// simStream is the simulated platform's event stream for model.
func simStream(b testing.TB, model string) []byte {
	b.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/responses",
		strings.NewReader(`{"model":"`+model+`","input":"Write one short sentence about benchmarks.","stream":true}`))
	req.Header.Set("Authorization", "Bearer sk-platform")
	w := httptest.NewRecorder()
	platformsim.New(platformsim.Options{}).ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("sim answered %d: %s", w.Code, w.Body.Bytes())
	}
	return w.Body.Bytes()
}

// eventByEvent hands out one SSE event per Read, the way a platform flushing each event
// arrives over a socket.
type eventByEvent struct{ b []byte }

func (e *eventByEvent) Read(p []byte) (int, error) {
	if len(e.b) == 0 {
		return 0, io.EOF
	}
	event, _, _ := bytes.Cut(e.b, []byte("\n\n"))
	n := copy(p, e.b[:min(len(e.b), len(event)+2)])
	e.b = e.b[n:]
	return n, nil
}

// BenchmarkResponsesRelay is the Responses pass-through to an HTTP client: sim-long's
// 200-delta stream, arriving one event per Read, relayed byte for byte by Pump.Responses to a
// client that takes every write. It holds the HTTP path to its cost whatever else a relay can
// hand its events to (a WebSocket turn's sink).
func BenchmarkResponsesRelay(b *testing.B) {
	stream := simStream(b, "sim-long")
	out := &discardFlusher{}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		p := Pump{Out: NewWriter(out, 0), Obs: nopObserver{}, Client: context.Background(), Reserve: reserve}
		p.Responses(&eventByEvent{b: stream}, func() {})
	}
}

// discardFlusher is an HTTP client that takes every write.
type discardFlusher struct{}

func (discardFlusher) Write(p []byte) (int, error) { return len(p), nil }
func (discardFlusher) Flush()                      {}

// nopObserver is a request record that keeps nothing.
type nopObserver struct{}

func (nopObserver) Event(string, []byte)  {}
func (nopObserver) Sent()                 {}
func (nopObserver) Response([]byte)       {}
func (nopObserver) ClientGone()           {}
func (nopObserver) UpstreamFailed(string) {}

// BenchmarkResponsesRelayToSink is the same stream handed to a sink (a WebSocket turn's
// writer) event by event, typed, instead of as bytes.
func BenchmarkResponsesRelayToSink(b *testing.B) {
	stream := simStream(b, "sim-long")
	out := nopSink{}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		p := Pump{Out: NewWriter(out, 0), Obs: nopObserver{}, Client: context.Background(), Reserve: reserve}
		p.Responses(&eventByEvent{b: stream}, func() {})
	}
}

// nopSink is a sink that takes every event.
type nopSink struct{ discardFlusher }

func (nopSink) Header() http.Header        { return http.Header{} }
func (nopSink) WriteHeader(int)            {}
func (nopSink) Event(string, []byte) error { return nil }

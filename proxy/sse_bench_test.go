package proxy

import (
	"bytes"
	"io"
	"testing"

	sse "github.com/tmaxmax/go-sse"
)

// BenchmarkEventScanner reads sim-long's 200-delta stream, one event per Read as it arrives
// from a socket, with modelgate's eventReader and with go-sse's reader, the design card's SSE
// library. Both see every event's type and data; only eventReader also keeps each event's
// bytes as received (the Responses passthrough forwards those unaltered) and flags lines
// that are not SSE. bench/README.md records the result that keeps eventReader.
func BenchmarkEventScanner(b *testing.B) {
	stream := benchUpstream(b, "sim-long").stream
	events := bytes.Count(stream, []byte("\n\n"))
	b.Run("eventReader", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			er := newEventReader(&eventByEvent{b: stream}, maxEventSize)
			n := 0
			for {
				ev, err := er.next()
				if err != nil {
					break
				}
				if ev.typ != "" && len(ev.data) > 0 {
					n++
				}
			}
			er.release()
			if n != events {
				b.Fatalf("read %d events of %d", n, events)
			}
		}
	})
	b.Run("go-sse", func(b *testing.B) {
		cfg := &sse.ReadConfig{MaxEventSize: maxEventSize}
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

package translate

import "testing"

// BenchmarkStream200To is BenchmarkStream200 the way the proxy's single-choice relay feeds
// the converter: one output buffer reused across events.
func BenchmarkStream200To(b *testing.B) {
	meta := Meta{ID: "chatcmpl-bench", Created: 1760000000, Model: "gpt-5.4", IncludeUsage: true}
	benchFeed200(b, func() *StreamConverter { return NewStreamConverter(meta) })
}

// eventFeeder is a stream converter as the relay drives it.
type eventFeeder interface {
	FeedTo(dst []byte, eventType string, data []byte) (out []byte, done bool)
}

// benchFeed200 feeds stream200's events to a new converter each iteration, into one output
// buffer reused across events. The converter's type is a type parameter, not the interface,
// so the calls are as direct as the relay's.
func benchFeed200[C eventFeeder](b *testing.B, newConverter func() C) {
	evs := stream200()
	data := make([][]byte, len(evs))
	for i, e := range evs {
		data[i] = []byte(e[1])
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		c := newConverter()
		for i, e := range evs {
			var done bool
			if buf, done = c.FeedTo(buf[:0], e[0], data[i]); done {
				break
			}
		}
	}
}

package translate

import "testing"

// BenchmarkStream200To is BenchmarkStream200 the way the proxy's single-choice relay feeds
// the converter: one output buffer reused across events.
func BenchmarkStream200To(b *testing.B) {
	evs := stream200()
	data := make([][]byte, len(evs))
	for i, e := range evs {
		data[i] = []byte(e[1])
	}
	meta := Meta{ID: "chatcmpl-bench", Created: 1760000000, Model: "gpt-5.4", IncludeUsage: true}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		c := NewStreamConverter(meta)
		for i, e := range evs {
			var done bool
			if buf, done = c.FeedTo(buf[:0], e[0], data[i]); done {
				break
			}
		}
	}
}

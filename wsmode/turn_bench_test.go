package wsmode

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkTurnWriterDeltas is the socket's cost per streamed delta event: the SSE split, the
// event's type and sequence read, the partial output kept for steering, and (on a lane) the
// stream_id tag. The frame write itself is not counted.
func BenchmarkTurnWriterDeltas(b *testing.B) {
	var stream []byte
	for i := range 100 {
		stream = fmt.Appendf(stream, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"word \",\"logprobs\":[]}\n\n", i+3)
	}
	added := []byte("data: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[]}}\n\n")
	for _, lane := range []string{"", "lane-1"} {
		b.Run("lane="+lane, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				w := newTurnWriter(func([]byte) error { return nil })
				w.tag = laneTag(lane)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(added)
				_, _ = w.Write(stream)
			}
		})
	}
}

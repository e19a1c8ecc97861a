package wsmode

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkTurnWriterDeltas is the socket's cost per streamed delta event, handed over whole
// as the relay hands it: the event's sequence read, the partial output kept for steering, and
// (on a lane) the stream_id tag. The frame write itself is not counted.
func BenchmarkTurnWriterDeltas(b *testing.B) {
	var deltas [][]byte
	size := 0
	for i := range 100 {
		d := fmt.Appendf(nil, "{\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"word \",\"logprobs\":[]}", i+3)
		deltas = append(deltas, d)
		size += len(d)
	}
	added := []byte("{\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[]}}")
	for _, lane := range []string{"", "lane-1"} {
		b.Run("lane="+lane, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				w := newTurnWriter(func([]byte) error { return nil })
				w.tag = laneTag(lane)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_ = w.Event("response.output_item.added", added)
				for _, d := range deltas {
					_ = w.Event("response.output_text.delta", d)
				}
			}
		})
	}
}

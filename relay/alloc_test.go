package relay

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/translate"
)

// The relay is the hot path: a stream costs its setup, and no event costs an allocation,
// through the pass-through (to an SSE client or a sink) and the translated pump alike.
func TestRelayAllocatesNothingPerEvent(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("counts allocations, which pooling keeps constant only without the race detector")
	}
	stream := func(deltas int) string { return created + strings.Repeat(delta, deltas) + complete }
	relays := map[string]func(*Pump, string){
		"responses": func(p *Pump, in string) { p.Responses(strings.NewReader(in), func() {}) },
		"chat": func(p *Pump, in string) {
			p.Direct(strings.NewReader(in), func() {}, translate.NewStreamConverter(chatMeta()))
		},
		"messages": func(p *Pump, in string) {
			p.Direct(strings.NewReader(in), func() {}, translate.NewMessagesStream(translate.MessagesMeta{ID: "msg_1", Model: "m"}))
		},
	}
	for name, run := range relays {
		allocs := func(deltas int) float64 {
			in := stream(deltas)
			rec := httptest.NewRecorder()
			rec.Body.Grow(64 * len(in)) // the recorder's own growth is not the relay's
			obs := &record{}
			return testing.AllocsPerRun(20, func() {
				rec.Body.Reset()
				p := newPump(context.Background(), rec, obs)
				// The headers' start is the stream's setup, made at its first flush: at once
				// here, so that neither count depends on whether the stream outgrew the
				// room beside unsent headers (Writer.startLocked).
				p.Out.Flush()
				run(p, in)
			})
		}
		few, many := allocs(10), allocs(200)
		t.Logf("%s: %.0f allocations for 10 deltas, %.0f for 200", name, few, many)
		if many > few {
			t.Errorf("%s: %.0f allocations for 10 deltas, %.0f for 200: an event allocates", name, few, many)
		}
	}
	// The pass-through to a sink (a WebSocket turn) hands each event over without a copy.
	toSink := func(deltas int) float64 {
		in := stream(deltas)
		return testing.AllocsPerRun(20, func() {
			p := &Pump{Out: NewWriter(nopSink{}, 0), Obs: &record{}, Client: context.Background(), Reserve: reserve}
			p.Responses(strings.NewReader(in), func() {})
		})
	}
	if few, many := toSink(10), toSink(200); many > few {
		t.Errorf("responses to a sink: %.0f allocations for 10 deltas, %.0f for 200: an event allocates", few, many)
	}
}

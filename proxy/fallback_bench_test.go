package proxy

import (
	"testing"

	"modelgate/config"
)

// BenchmarkChatFallbacks is BenchmarkChat's non-stream and stream cases for a model with a
// fallback chain whose first attempt succeeds: what the chain adds to the success path (its
// lookups; nothing is tried or allocated for the fallbacks).
func BenchmarkChatFallbacks(b *testing.B) {
	up := benchUpstream(b, "")
	const models = `models:
  - id: bench
    fallbacks: [spare]
  - id: spare
`
	msgs := `"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]`
	for _, c := range []struct{ name, body string }{
		{"nonstream", `{"model":"bench",` + msgs + `}`},
		{"stream", `{"model":"bench","stream":true,` + msgs + `}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchRoute(b, benchServer(b, benchDeps(b, up, models)).Handler(), "/v1/chat/completions", c.body, 100)
		})
	}
}

// BenchmarkFallbackSuccessPath is the chain's whole added work on a call whose first attempt
// succeeds, alone: the look-ups openGateway and openOnce make (a model with fallbacks, one
// without). The route benchmarks above measure it inside a request, where the noise of a
// shared machine is larger than it.
func BenchmarkFallbackSuccessPath(b *testing.B) {
	t := newModelTable([]config.Model{{ID: "bench", Fallbacks: []string{"spare"}}, {ID: "spare"}, {ID: "plain"}})
	for _, id := range []string{"bench", "plain"} {
		b.Run(id, func(b *testing.B) {
			var watched int
			for b.Loop() {
				if t.chained[id] == nil {
					continue
				}
				if m := t.chained[id]; m != nil && m.FirstTokenTimeout > 0 {
					watched++
				}
			}
			_ = watched
		})
	}
}

package proxy

import "testing"

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

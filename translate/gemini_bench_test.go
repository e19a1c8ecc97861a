package translate

import "testing"

// typicalGemini is typicalChat's conversation as a Gemini client sends it.
var typicalGemini = []byte(`{"generationConfig":{"temperature":0.3,"maxOutputTokens":800},
"tools":[{"functionDeclarations":[{"name":"search_docs","description":"Search the product documentation and return the best matching passages.",
 "parametersJsonSchema":{"type":"object","properties":{"query":{"type":"string","description":"What to look for"},"limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query","limit"],"additionalProperties":false}}]}],
"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}},"labels":{"user":"user-1234"},
"systemInstruction":{"parts":[{"text":"You are a helpful support assistant for a cloud product. Answer concisely, cite the documentation you used, and never invent features. If you are unsure, say so and suggest contacting support."}]},
"contents":[
 {"role":"user","parts":[{"text":"Hi! I am trying to configure rate limits for my team. Where do I set the tokens per minute value, and does it apply per key or per team?"}]},
 {"role":"model","parts":[{"functionCall":{"id":"call_abc123","name":"search_docs","args":{"query":"team rate limits tokens per minute","limit":3}}}]},
 {"role":"user","parts":[{"functionResponse":{"id":"call_abc123","name":"search_docs","response":{"output":"[1] Limits are configured per team in config.yaml under teams[].limits: requests_per_minute, tokens_per_minute, concurrent_requests, tokens_per_day. [2] Keys may override limits under teams[].keys[].limits; the stricter of key and team applies. [3] Zero means unlimited."}}}]},
 {"role":"model","parts":[{"text":"You set tokens_per_minute under teams[].limits in config.yaml; it applies to the whole team. A key can also have its own limits, and the stricter of the two applies [1][2]."}]},
 {"role":"user","parts":[{"text":"Great, thanks. And what happens when a stream is already running and the team goes over the limit? Is the stream cut, or does it finish? Here is a screenshot of my dashboard."},{"fileData":{"mimeType":"image/png","fileUri":"https://example.com/screenshots/dashboard-2026-08-21.png"}}]}
]}`)

// BenchmarkGeminiToResponses is BenchmarkChatToResponses for the Gemini dialect.
func BenchmarkGeminiToResponses(b *testing.B) {
	benchTranslate(b, typicalGemini, func(body []byte) error {
		r, err := ParseGemini(body, "models/gemini-2.5-pro", true, ParseOptions{})
		if err == nil {
			_ = r.ToResponses("up-model", RequestOptions{})
		}
		return err
	})
}

// BenchmarkGeminiStream200To is BenchmarkStream200To for the Gemini converter (SSE framing).
func BenchmarkGeminiStream200To(b *testing.B) {
	meta := GeminiMeta{Model: "gemini-2.5-pro"}
	benchFeed200(b, func() *GeminiStream { return NewGeminiStream(GeminiSSE, meta) })
}

func BenchmarkResponseToGemini(b *testing.B) {
	evs := stream200()
	resp := []byte(evs[len(evs)-1][1])
	meta := GeminiMeta{Model: "gemini-2.5-pro"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ResponseToGemini(resp, meta); err != nil {
			b.Fatal(err)
		}
	}
}

package translate

import "testing"

// typicalMessages is typicalChat's conversation as an Anthropic client sends it.
var typicalMessages = []byte(`{"model":"claude-sonnet","stream":true,"temperature":0.3,"max_tokens":800,
"tools":[{"name":"search_docs","description":"Search the product documentation and return the best matching passages.",
 "input_schema":{"type":"object","properties":{"query":{"type":"string","description":"What to look for"},"limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query","limit"],"additionalProperties":false}}],
"tool_choice":{"type":"auto"},"metadata":{"user_id":"user-1234"},
"system":"You are a helpful support assistant for a cloud product. Answer concisely, cite the documentation you used, and never invent features. If you are unsure, say so and suggest contacting support.",
"messages":[
 {"role":"user","content":"Hi! I am trying to configure rate limits for my team. Where do I set the tokens per minute value, and does it apply per key or per team?"},
 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_abc123","name":"search_docs","input":{"query":"team rate limits tokens per minute","limit":3}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_abc123","content":"[1] Limits are configured per team in config.yaml under teams[].limits: requests_per_minute, tokens_per_minute, concurrent_requests, tokens_per_day. [2] Keys may override limits under teams[].keys[].limits; the stricter of key and team applies. [3] Zero means unlimited."}]},
 {"role":"assistant","content":"You set tokens_per_minute under teams[].limits in config.yaml; it applies to the whole team. A key can also have its own limits, and the stricter of the two applies [1][2]."},
 {"role":"user","content":[{"type":"text","text":"Great, thanks. And what happens when a stream is already running and the team goes over the limit? Is the stream cut, or does it finish? Here is a screenshot of my dashboard."},{"type":"image","source":{"type":"url","url":"https://example.com/screenshots/dashboard-2026-08-21.png"}}]}
]}`)

// BenchmarkMessagesToResponses is BenchmarkChatToResponses for the Messages dialect.
func BenchmarkMessagesToResponses(b *testing.B) {
	benchTranslate(b, typicalMessages, func(body []byte) error {
		r, err := ParseMessages(body)
		if err == nil {
			_ = r.ToResponses("up-model", RequestOptions{})
		}
		return err
	})
}

// BenchmarkMessagesStream200To is BenchmarkStream200To for the Messages converter: the same
// 200 upstream events, one output buffer reused across events as the relay does.
func BenchmarkMessagesStream200To(b *testing.B) {
	meta := MessagesMeta{ID: "msg_bench", Model: "claude-sonnet"}
	benchFeed200(b, func() *MessagesStream { return NewMessagesStream(meta) })
}

func BenchmarkResponseToMessage(b *testing.B) {
	evs := stream200()
	resp := []byte(evs[len(evs)-1][1])
	meta := MessagesMeta{ID: "msg_bench", Model: "claude-sonnet"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ResponseToMessage(resp, meta); err != nil {
			b.Fatal(err)
		}
	}
}

package translate

import (
	"encoding/json"
	"strings"
	"testing"
)

// typicalChat is a ~2 KB request: system prompt, a few turns, one tool round trip, a tool
// definition and the usual sampling fields.
var typicalChat = []byte(`{"model":"gpt-5.4","stream":true,"stream_options":{"include_usage":true},"temperature":0.3,"max_tokens":800,
"tools":[{"type":"function","function":{"name":"search_docs","description":"Search the product documentation and return the best matching passages.","strict":true,
 "parameters":{"type":"object","properties":{"query":{"type":"string","description":"What to look for"},"limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query","limit"],"additionalProperties":false}}}],
"tool_choice":"auto","user":"user-1234",
"messages":[
 {"role":"system","content":"You are a helpful support assistant for a cloud product. Answer concisely, cite the documentation you used, and never invent features. If you are unsure, say so and suggest contacting support."},
 {"role":"user","content":"Hi! I am trying to configure rate limits for my team. Where do I set the tokens per minute value, and does it apply per key or per team?"},
 {"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123","type":"function","function":{"name":"search_docs","arguments":"{\"query\":\"team rate limits tokens per minute\",\"limit\":3}"}}]},
 {"role":"tool","tool_call_id":"call_abc123","content":"[1] Limits are configured per team in config.yaml under teams[].limits: requests_per_minute, tokens_per_minute, concurrent_requests, tokens_per_day. [2] Keys may override limits under teams[].keys[].limits; the stricter of key and team applies. [3] Zero means unlimited."},
 {"role":"assistant","content":"You set tokens_per_minute under teams[].limits in config.yaml; it applies to the whole team. A key can also have its own limits, and the stricter of the two applies [1][2]."},
 {"role":"user","content":[{"type":"text","text":"Great, thanks. And what happens when a stream is already running and the team goes over the limit? Is the stream cut, or does it finish? Here is a screenshot of my dashboard."},{"type":"image_url","image_url":{"url":"https://example.com/screenshots/dashboard-2026-08-21.png","detail":"low"}}]}
]}`)

func BenchmarkChatToResponses(b *testing.B) {
	benchTranslate(b, typicalChat, func(body []byte) error {
		r, err := ParseChat(body)
		if err == nil {
			_, err = r.ToResponses("gpt-5.4-up", RequestOptions{})
		}
		return err
	})
}

// benchTranslate times one dialect's request translation, parse and framing, of body.
func benchTranslate(b *testing.B, body []byte, translate func(body []byte) error) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := translate(body); err != nil {
			b.Fatal(err)
		}
	}
}

// stream200 is a 200-event upstream stream: lifecycle events, 190 text deltas, the
// completion with usage.
func stream200() [][2]string {
	ev := func(v map[string]any) string { b, _ := json.Marshal(v); return string(b) }
	evs := [][2]string{
		{"response.created", ev(map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1", "status": "in_progress", "output": []any{}}})},
		{"response.in_progress", ev(map[string]any{"type": "response.in_progress", "response": map[string]any{"id": "resp_1", "status": "in_progress"}})},
		{"response.output_item.added", ev(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{"type": "message", "id": "msg_1", "content": []any{}}})},
		{"response.content_part.added", ev(map[string]any{"type": "response.content_part.added", "output_index": 0, "content_index": 0, "item_id": "msg_1", "part": map[string]any{"type": "output_text", "text": ""}})},
	}
	var full strings.Builder
	for i := range 190 {
		d := "word" + string(rune('a'+i%26)) + " "
		full.WriteString(d)
		evs = append(evs, [2]string{"response.output_text.delta", ev(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": d, "logprobs": []any{}, "sequence_number": i + 4})})
	}
	item := map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": full.String(), "annotations": []any{}}}}
	evs = append(evs,
		[2]string{"response.output_text.done", ev(map[string]any{"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": full.String()})},
		[2]string{"response.content_part.done", ev(map[string]any{"type": "response.content_part.done", "output_index": 0, "content_index": 0, "part": item["content"].([]any)[0]})},
		[2]string{"response.output_item.done", ev(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})},
		[2]string{"response.queued", ev(map[string]any{"type": "response.web_search_call.completed", "output_index": 1})},
		[2]string{"response.queued", ev(map[string]any{"type": "response.web_search_call.completed", "output_index": 1})},
		[2]string{"response.completed", ev(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "status": "completed", "output": []any{item},
			"usage": map[string]any{"input_tokens": 500, "output_tokens": 190, "total_tokens": 690}}})},
	)
	return evs
}

func BenchmarkStream200(b *testing.B) {
	evs := stream200()
	if len(evs) != 200 {
		b.Fatalf("%d events", len(evs))
	}
	data := make([][]byte, len(evs))
	for i, e := range evs {
		data[i] = []byte(e[1])
	}
	meta := Meta{ID: "chatcmpl-bench", Created: 1760000000, Model: "gpt-5.4", IncludeUsage: true}
	b.ReportAllocs()
	for b.Loop() {
		c := NewStreamConverter(meta)
		for i, e := range evs {
			if _, done := c.Feed(e[0], data[i]); done {
				break
			}
		}
	}
}

func BenchmarkResponseToChat(b *testing.B) {
	evs := stream200()
	resp := []byte(evs[len(evs)-1][1])
	meta := Meta{ID: "chatcmpl-bench", Created: 1760000000, Model: "gpt-5.4"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ResponseToChat(resp, meta); err != nil {
			b.Fatal(err)
		}
	}
}

package tests

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"modelgate/platformsim"
)

// Shapes the official Go client must parse: cache-write tokens in chat usage, and streamed
// custom tool calls, for which the Chat Completions specification has no chunk type.
func TestChatSDKShapes(t *testing.T) {
	p, g := startKeysGateway(t, "")
	client := sdkClient(g, alphaKey)
	t.Run("cache_write_tokens", func(t *testing.T) { chatCacheWriteTokens(t, p, client) })
	t.Run("custom_tool_call_stream", func(t *testing.T) { chatCustomToolStream(t, p, client) })
	g.assertNoSecret(t, p.Key)
}

// scriptedEvent is one Responses event whose JSON type matches its SSE name.
func scriptedEvent(typ, fields string) platformsim.Event {
	return platformsim.Event{Type: typ, Data: `{"type":"` + typ + `",` + fields + `}`}
}

const (
	scriptedResp  = `"id":"resp_scripted","object":"response","created_at":1700000000,"model":"sim-chat"`
	cacheUsage    = `"usage":{"input_tokens":200,"input_tokens_details":{"cached_tokens":64,"cache_write_tokens":48},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":205}`
	scriptedReply = `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"cached","annotations":[]}]}`
)

// The platform's cache-write count reaches prompt_tokens_details.cache_write_tokens, where
// the SDK's CompletionUsage reads it, in a plain answer and in a stream's usage chunk.
func chatCacheWriteTokens(t *testing.T, p *platform, client openai.Client) {
	check := func(t *testing.T, u openai.CompletionUsage) {
		t.Helper()
		d := u.PromptTokensDetails
		if !d.JSON.CacheWriteTokens.Valid() || d.CacheWriteTokens != 48 || d.CachedTokens != 64 || u.PromptTokens != 200 {
			t.Errorf("usage %s: cache_write_tokens %d, cached %d, prompt %d", u.RawJSON(), d.CacheWriteTokens, d.CachedTokens, u.PromptTokens)
		}
	}
	t.Run("non_stream", func(t *testing.T) {
		p.Sim.Enqueue("/v1/responses", platformsim.Reply{Status: 200, Header: map[string]string{"Content-Type": "application/json"},
			Body: []byte(`{` + scriptedResp + `,"status":"completed","output":[` + scriptedReply + `],` + cacheUsage + `}`)})
		res, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim-chat", Messages: userPrompt("cache me")})
		if err != nil {
			t.Fatal(err)
		}
		check(t, res.Usage)
	})
	t.Run("stream", func(t *testing.T) {
		p.Sim.Enqueue("/v1/responses", platformsim.Reply{Events: []platformsim.Event{
			scriptedEvent("response.created", `"sequence_number":0,"response":{`+scriptedResp+`,"status":"in_progress","output":[]}`),
			scriptedEvent("response.output_text.delta", `"sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"cached"}`),
			scriptedEvent("response.completed", `"sequence_number":2,"response":{`+scriptedResp+`,"status":"completed","output":[`+scriptedReply+`],`+cacheUsage+`}`),
		}})
		log := streamChat(t, client, openai.ChatCompletionNewParams{Model: "sim-chat", Messages: userPrompt("cache me"),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
		check(t, log.chunks[len(log.chunks)-1].Usage)
	})
}

// A streamed custom tool call: every chunk parses, the accumulator takes every chunk, and the
// call's id, name and whole input can be rebuilt from the chunks as the SDK delivers them
// (the custom payload is not in the SDK's chunk type, so it is read from the raw chunk).
func chatCustomToolStream(t *testing.T, p *platform, client openai.Client) {
	item := func(input, status string) string {
		return `"output_index":0,"item":{"type":"custom_tool_call","id":"ctc_1","call_id":"call_sh","name":"shell","input":"` + input + `","status":"` + status + `"}`
	}
	p.Sim.Enqueue("/v1/responses", platformsim.Reply{Events: []platformsim.Event{
		scriptedEvent("response.created", `"sequence_number":0,"response":{`+scriptedResp+`,"status":"in_progress","output":[]}`),
		scriptedEvent("response.output_item.added", `"sequence_number":1,`+item("", "in_progress")),
		scriptedEvent("response.custom_tool_call_input.delta", `"sequence_number":2,"item_id":"ctc_1","output_index":0,"delta":"echo"`),
		scriptedEvent("response.custom_tool_call_input.delta", `"sequence_number":3,"item_id":"ctc_1","output_index":0,"delta":" hi"`),
		scriptedEvent("response.custom_tool_call_input.done", `"sequence_number":4,"item_id":"ctc_1","output_index":0,"input":"echo hi"`),
		scriptedEvent("response.output_item.done", `"sequence_number":5,`+item("echo hi", "completed")),
		scriptedEvent("response.completed", `"sequence_number":6,"response":{`+scriptedResp+`,"status":"completed","output":[{"type":"custom_tool_call","id":"ctc_1","call_id":"call_sh","name":"shell","input":"echo hi","status":"completed"}],"usage":{"input_tokens":20,"output_tokens":3,"total_tokens":23}}`),
	}})
	log := streamChat(t, client, openai.ChatCompletionNewParams{Model: "sim-chat", Messages: userPrompt("run it"),
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionCustomTool(openai.ChatCompletionCustomToolCustomParam{Name: "shell"})}})
	acc := openai.ChatCompletionAccumulator{}
	var id, typ, name string
	var input strings.Builder
	for i, ch := range log.chunks {
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator rejected chunk %d: %s", i, ch.RawJSON())
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index != 0 {
					t.Errorf("tool call index %d", tc.Index)
				}
				id, typ = id+tc.ID, typ+tc.Type
				custom := gjson.Parse(tc.JSON.ExtraFields["custom"].Raw())
				if !custom.IsObject() {
					t.Fatalf("chunk %d: tool call delta without a custom object: %s", i, tc.RawJSON())
				}
				name += custom.Get("name").Str
				input.WriteString(custom.Get("input").Str)
			}
		}
	}
	if id != "call_sh" || typ != "custom" || name != "shell" || input.String() != "echo hi" {
		t.Errorf("rebuilt id %q type %q name %q input %q", id, typ, name, input.String())
	}
	if f := log.finishes(0); len(f) != 1 || f[0] != "tool_calls" {
		t.Errorf("finish reasons %v", f)
	}
	if calls := acc.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].ID != "call_sh" || calls[0].Type != "custom" {
		t.Errorf("accumulated tool calls %+v", calls)
	}
}

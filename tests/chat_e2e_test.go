package tests

import (
	"encoding/json"
	"errors"
	"modelgate/apitest"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

	"modelgate/platformsim"
)

// These tests drive the real modelgate binary with the official Go client, the way an
// application would, and look at both ends: what the client got and what reached the platform.

// simAnswer is the simulated platform's deterministic text for a plain prompt.
func simAnswer(upstreamModel, prompt string) string {
	return "Hello from " + upstreamModel + ". You said: " + prompt
}

func sdkClient(g *gateway, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// upstreamCalls returns the generation requests the platform received after the first mark
// records; tests share one platform and take a mark before they act.
func upstreamCalls(p *platform, mark int) []platformsim.Recorded {
	var out []platformsim.Recorded
	for _, r := range p.Sim.Requests()[mark:] {
		if r.Path == "/v1/responses" {
			out = append(out, r)
		}
	}
	return out
}

// oneUpstreamCall returns the single generation request since mark, failing otherwise.
func oneUpstreamCall(t *testing.T, p *platform, mark int) gjson.Result {
	t.Helper()
	calls := upstreamCalls(p, mark)
	if len(calls) != 1 {
		t.Fatalf("platform received %d generation requests, want 1", len(calls))
	}
	if got := calls[0].Header.Get("Authorization"); got != "Bearer "+p.Key {
		t.Errorf("upstream Authorization is not the platform key (len %d)", len(got))
	}
	return gjson.ParseBytes(calls[0].Body)
}

// itemText is an input item's text: a string content or its text parts joined.
func itemText(item gjson.Result) string {
	c := item.Get("content")
	if c.Type == gjson.String {
		return c.Str
	}
	var b strings.Builder
	for _, part := range c.Array() {
		b.WriteString(part.Get("text").Str)
	}
	return b.String()
}

// findItems returns the input items matching pred.
func findItems(body gjson.Result, pred func(gjson.Result) bool) []gjson.Result {
	var out []gjson.Result
	for _, it := range body.Get("input").Array() {
		if pred(it) {
			out = append(out, it)
		}
	}
	return out
}

func isUserMessage(it gjson.Result) bool {
	typ := it.Get("type").Str
	return (typ == "" || typ == "message") && it.Get("role").Str == "user"
}

// chunkLog is a chat stream as the SDK delivered it.
type chunkLog struct {
	chunks []openai.ChatCompletionChunk
}

func (l *chunkLog) content(index int64) string {
	var b strings.Builder
	for _, ch := range l.chunks {
		for _, c := range ch.Choices {
			if c.Index == index {
				b.WriteString(c.Delta.Content)
			}
		}
	}
	return b.String()
}

// finishes returns every finish_reason sent for choice index, in order.
func (l *chunkLog) finishes(index int64) []string {
	var out []string
	for _, ch := range l.chunks {
		for _, c := range ch.Choices {
			if c.Index == index && c.FinishReason != "" {
				out = append(out, c.FinishReason)
			}
		}
	}
	return out
}

// usageChunks returns the positions of chunks that carry usage.
func (l *chunkLog) usageChunks() []int {
	var out []int
	for i, ch := range l.chunks {
		if ch.JSON.Usage.Valid() {
			out = append(out, i)
		}
	}
	return out
}

// assertSameEnvelope checks every chunk has the first chunk's id, created and the client's model.
func (l *chunkLog) assertSameEnvelope(t *testing.T, model string) {
	t.Helper()
	if len(l.chunks) == 0 {
		t.Fatal("no chunks")
	}
	first := l.chunks[0]
	if !strings.HasPrefix(first.ID, "chatcmpl-") || first.Created == 0 || first.Model != model {
		t.Errorf("first chunk id=%q created=%d model=%q, want chatcmpl-*, a time and %q", first.ID, first.Created, first.Model, model)
	}
	for i, ch := range l.chunks {
		if ch.ID != first.ID || ch.Created != first.Created || ch.Model != first.Model || ch.Object != "chat.completion.chunk" {
			t.Errorf("chunk %d: id=%q created=%d model=%q object=%q differ from the first chunk", i, ch.ID, ch.Created, ch.Model, ch.Object)
		}
	}
}

// streamChat runs one streaming request to its end; the SDK must end it without error.
func streamChat(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) *chunkLog {
	t.Helper()
	stream := client.Chat.Completions.NewStreaming(ctx(t), params, opts...)
	defer stream.Close()
	log := &chunkLog{}
	for stream.Next() {
		log.chunks = append(log.chunks, stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream ended with an error after %d chunks: %v", len(log.chunks), err)
	}
	return log
}

// chargedSince reports what the platform charged its key between two totals.
func chargedSince(p *platform, before platformsim.Totals) platformsim.Totals {
	now := p.Sim.Totals(p.Key)
	return platformsim.Totals{Requests: now.Requests - before.Requests,
		InputTokens: now.InputTokens - before.InputTokens, OutputTokens: now.OutputTokens - before.OutputTokens}
}

func userPrompt(text string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}
}

func TestChatCompletionsGoClient(t *testing.T) {
	p, g := startKeysGateway(t, "")
	client := sdkClient(g, alphaKey)

	t.Run("non_stream", func(t *testing.T) { chatNonStream(t, p, client) })
	t.Run("stream", func(t *testing.T) { chatStream(t, g, p, client) })
	t.Run("stream_parallel_tool_calls", func(t *testing.T) { chatParallelTools(t, p, client) })
	t.Run("tool_index_after_reasoning", func(t *testing.T) { chatToolIndexAfterReasoning(t, p, client) })
	t.Run("tool_result_round_trip", func(t *testing.T) { chatToolRoundTrip(t, p, client) })
	t.Run("json_schema", func(t *testing.T) { chatJSONSchema(t, p, client) })
	t.Run("n2", func(t *testing.T) { chatN2(t, p, client) })
	t.Run("include_usage", func(t *testing.T) { chatIncludeUsage(t, p, client) })
	t.Run("errors", func(t *testing.T) { chatErrors(t, g, p) })
	t.Run("outcomes", func(t *testing.T) { chatOutcomes(t, client) })
	t.Run("reasoning", func(t *testing.T) { chatReasoning(t, client) })
	g.assertNoSecret(t, p.Key)
}

func chatNonStream(t *testing.T, p *platform, client openai.Client) {
	const prompt = "Say hello to the gateway"
	mark, before := len(p.Sim.Requests()), p.Sim.Totals(p.Key)
	resp, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Answer briefly."),
			openai.UserMessage(prompt),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Object != "chat.completion" || !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Model != "gpt-4o-mini" || resp.Created == 0 {
		t.Errorf("envelope: object=%q id=%q model=%q created=%d", resp.Object, resp.ID, resp.Model, resp.Created)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("%d choices, want 1", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if ch.Index != 0 || ch.Message.Role != "assistant" || ch.FinishReason != "stop" {
		t.Errorf("choice: index=%d role=%q finish=%q", ch.Index, ch.Message.Role, ch.FinishReason)
	}
	if want := simAnswer("sim-chat", prompt); ch.Message.Content != want {
		t.Errorf("content = %q, want %q", ch.Message.Content, want)
	}
	u := resp.Usage
	if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v", u)
	}
	if c := chargedSince(p, before); c.InputTokens != u.PromptTokens || c.OutputTokens != u.CompletionTokens {
		t.Errorf("usage %d/%d differs from what the platform charged %d/%d", u.PromptTokens, u.CompletionTokens, c.InputTokens, c.OutputTokens)
	}

	body := oneUpstreamCall(t, p, mark)
	if body.Get("model").Str != "sim-chat" {
		t.Errorf("upstream model = %s, want the alias target sim-chat", body.Get("model").Raw)
	}
	if body.Get("store").Type != gjson.False {
		t.Errorf("upstream store = %s, want an explicit false", body.Get("store").Raw)
	}
	if body.Get("stream").Bool() {
		t.Error("a non-stream request without stop went upstream as a stream")
	}
	if body.Get("messages").Exists() {
		t.Error("the chat messages field went upstream")
	}
	users := findItems(body, isUserMessage)
	if len(users) != 1 || itemText(users[0]) != prompt {
		t.Errorf("upstream user items = %v, want one with the prompt", users)
	}
	system := body.Get("instructions").Str
	for _, it := range findItems(body, func(it gjson.Result) bool { r := it.Get("role").Str; return r == "system" || r == "developer" }) {
		system += itemText(it)
	}
	if system != "Answer briefly." {
		t.Errorf("system text upstream = %q (instructions or a system/developer item)", system)
	}
}

func chatStream(t *testing.T, g *gateway, p *platform, client openai.Client) {
	const prompt = "Stream me a greeting"
	params := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userPrompt(prompt)}
	full, err := client.Chat.Completions.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	mark := len(p.Sim.Requests())
	log := streamChat(t, client, params)
	log.assertSameEnvelope(t, "gpt-4o-mini")

	if got := log.content(0); got != full.Choices[0].Message.Content || got == "" {
		t.Errorf("streamed content %q, non-stream content %q", got, full.Choices[0].Message.Content)
	}
	roles := 0
	for i, ch := range log.chunks {
		for _, c := range ch.Choices {
			if c.Delta.Role != "" {
				roles++
				if i != 0 || c.Delta.Role != "assistant" {
					t.Errorf("role %q in chunk %d, want assistant in chunk 0 only", c.Delta.Role, i)
				}
			}
		}
	}
	if roles != 1 {
		t.Errorf("role sent %d times, want exactly once", roles)
	}
	if f := log.finishes(0); !slices.Equal(f, []string{"stop"}) {
		t.Errorf("finish reasons = %v, want one stop", f)
	}
	last := log.chunks[len(log.chunks)-1]
	if len(last.Choices) != 1 || last.Choices[0].FinishReason != "stop" {
		t.Errorf("last chunk is not the finish chunk: %s", last.RawJSON())
	}
	if u := log.usageChunks(); len(u) != 0 {
		t.Errorf("usage in chunks %v without include_usage", u)
	}
	if body := oneUpstreamCall(t, p, mark); !body.Get("stream").Bool() {
		t.Error("a streaming request did not stream upstream")
	}

	// The SDK forgives a stream that just stops; the wire must end with exactly one [DONE].
	raw := rawChatStream(t, g, alphaKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"`+prompt+`"}]}`)
	if !strings.HasSuffix(raw, "data: [DONE]\n\n") || strings.Count(raw, "[DONE]") != 1 {
		t.Errorf("the stream does not end with one data: [DONE]; tail %q", raw[max(len(raw)-80, 0):])
	}
}

// rawStreamContent joins the content deltas of choice 0 in a raw chat stream.
func rawStreamContent(t *testing.T, raw string) string {
	t.Helper()
	var b strings.Builder
	for line := range strings.SplitSeq(raw, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		if !gjson.Valid(data) || gjson.Get(data, "error").Exists() {
			t.Fatalf("bad frame %q", data)
		}
		b.WriteString(gjson.Get(data, "choices.0.delta.content").Str)
	}
	return b.String()
}

// rawChatStream posts a chat body and returns the whole streamed answer as sent.
func rawChatStream(t *testing.T, g *gateway, key, body string) string {
	t.Helper()
	status, hdr, b := apitest.DoContext(t, ctx(t), http.MethodPost, g.URL+"/v1/chat/completions", key, strings.NewReader(body))
	if status != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q: %s", status, hdr.Get("Content-Type"), b)
	}
	return string(b)
}

// weatherTools are two functions the sim calls in parallel when asked to.
func weatherTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("Current weather in a city"),
			Parameters: shared.FunctionParameters{
				"type":       "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}},
				"required":   []string{"city"},
			},
		}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_time",
			Parameters: shared.FunctionParameters{
				"type":       "object",
				"properties": map[string]any{"timezone": map[string]any{"type": "string"}, "hours": map[string]any{"type": "integer"}},
				"required":   []string{"timezone", "hours"},
			},
		}),
	}
}

func chatParallelTools(t *testing.T, p *platform, client openai.Client) {
	mark := len(p.Sim.Requests())
	log := streamChat(t, client, openai.ChatCompletionNewParams{
		Model:    "sim-tools",
		Messages: userPrompt("Check the weather and the time in Paris, in parallel please."),
		Tools:    weatherTools(),
	})
	log.assertSameEnvelope(t, "sim-tools")
	acc := openai.ChatCompletionAccumulator{}
	headers := map[int64]int{} // tool index -> chunks carrying its id
	for i, ch := range log.chunks {
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator rejected chunk %d: %s", i, ch.RawJSON())
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.ID != "" {
					headers[tc.Index]++
					if tc.Type != "function" || tc.Function.Name == "" {
						t.Errorf("tool call %d announced without type/name: %s", tc.Index, ch.RawJSON())
					}
				} else if tc.Function.Name != "" || tc.Type != "" {
					t.Errorf("tool call %d repeats its name or type: %s", tc.Index, ch.RawJSON())
				}
			}
		}
	}
	if !reflect.DeepEqual(headers, map[int64]int{0: 1, 1: 1}) {
		t.Errorf("tool call id chunks per index = %v, want indices 0 and 1 announced once each", headers)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices accumulated", len(acc.Choices))
	}
	choice := acc.Choices[0]
	if choice.FinishReason != "tool_calls" {
		t.Errorf("finish_reason = %q, want tool_calls", choice.FinishReason)
	}
	calls := choice.Message.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("%d tool calls, want 2: %+v", len(calls), calls)
	}
	if calls[0].ID == "" || calls[0].ID == calls[1].ID {
		t.Errorf("tool call ids %q and %q are not distinct", calls[0].ID, calls[1].ID)
	}
	wantArgs := []map[string]bool{{"city": true}, {"timezone": true, "hours": true}}
	for i, name := range []string{"get_weather", "get_time"} {
		c := calls[i]
		if c.Function.Name != name || c.Type != "function" {
			t.Errorf("call %d: name %q type %q, want %s function", i, c.Function.Name, c.Type, name)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
			t.Errorf("call %d arguments are not JSON: %q", i, c.Function.Arguments)
			continue
		}
		for k := range wantArgs[i] {
			if _, ok := args[k]; !ok {
				t.Errorf("call %d arguments %s lack %q", i, c.Function.Arguments, k)
			}
		}
	}

	body := oneUpstreamCall(t, p, mark)
	tools := body.Get("tools").Array()
	if len(tools) != 2 || tools[0].Get("name").Str != "get_weather" || tools[0].Get("type").Str != "function" ||
		tools[0].Get("function").Exists() || tools[0].Get("strict").Type != gjson.False ||
		tools[1].Get("parameters.required.1").Str != "hours" {
		t.Errorf("upstream tools are not the flattened function tools: %s", body.Get("tools").Raw)
	}
}

// chatToolIndexAfterReasoning scripts a platform stream whose function calls sit at output
// indexes 1 and 2, after a reasoning item: clients use tool call indices as list positions, so
// they must come out dense (0, 1), or the SDK grows a phantom empty call.
func chatToolIndexAfterReasoning(t *testing.T, p *platform, client openai.Client) {
	ev := func(typ, data string) platformsim.Event {
		return platformsim.Event{Type: typ, Data: `{"type":"` + typ + `",` + data + `}`}
	}
	call := func(oi, id, callID, name, args string, done bool) string {
		a, status := "", "in_progress"
		if done {
			a, status = args, "completed"
		}
		argsJSON, _ := json.Marshal(a)
		return `"output_index":` + oi + `,"item":{"type":"function_call","id":"` + id + `","call_id":"` + callID +
			`","name":"` + name + `","arguments":` + string(argsJSON) + `,"status":"` + status + `"}`
	}
	const resp = `"id":"resp_scripted","object":"response","created_at":1700000000,"model":"sim-tools"`
	reasoning := `{"type":"reasoning","id":"rs_1","summary":[]}`
	final := `"response":{` + resp + `,"status":"completed","output":[` + reasoning + `,` +
		`{"type":"function_call","id":"fc_1","call_id":"call_a","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},` +
		`{"type":"function_call","id":"fc_2","call_id":"call_b","name":"get_time","arguments":"{\"timezone\":\"CET\",\"hours\":1}","status":"completed"}],` +
		`"usage":{"input_tokens":20,"output_tokens":6,"total_tokens":26}}`
	p.Sim.Enqueue("/v1/responses", platformsim.Reply{Events: []platformsim.Event{
		ev("response.created", `"sequence_number":0,"response":{`+resp+`,"status":"in_progress","output":[]}`),
		ev("response.output_item.added", `"sequence_number":1,"output_index":0,"item":`+reasoning),
		ev("response.output_item.done", `"sequence_number":2,"output_index":0,"item":`+reasoning),
		ev("response.output_item.added", `"sequence_number":3,`+call("1", "fc_1", "call_a", "get_weather", "", false)),
		ev("response.function_call_arguments.delta", `"sequence_number":4,"item_id":"fc_1","output_index":1,"delta":"{\"city\":"`),
		ev("response.function_call_arguments.delta", `"sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"\"Paris\"}"`),
		ev("response.output_item.done", `"sequence_number":6,`+call("1", "fc_1", "call_a", "get_weather", `{"city":"Paris"}`, true)),
		ev("response.output_item.added", `"sequence_number":7,`+call("2", "fc_2", "call_b", "get_time", "", false)),
		ev("response.function_call_arguments.delta", `"sequence_number":8,"item_id":"fc_2","output_index":2,"delta":"{\"timezone\":\"CET\",\"hours\":1}"`),
		ev("response.output_item.done", `"sequence_number":9,`+call("2", "fc_2", "call_b", "get_time", `{"timezone":"CET","hours":1}`, true)),
		ev("response.completed", `"sequence_number":10,`+final),
	}})
	log := streamChat(t, client, openai.ChatCompletionNewParams{
		Model: "sim-tools", Messages: userPrompt("Weather and time, in parallel."), Tools: weatherTools(),
	})
	acc := openai.ChatCompletionAccumulator{}
	indices := map[int64]bool{}
	for i, ch := range log.chunks {
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator rejected chunk %d: %s", i, ch.RawJSON())
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				indices[tc.Index] = true
			}
		}
	}
	if !reflect.DeepEqual(indices, map[int64]bool{0: true, 1: true}) {
		t.Errorf("tool call indices %v, want 0 and 1", indices)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices", len(acc.Choices))
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "call_a" || calls[1].ID != "call_b" ||
		calls[0].Function.Arguments != `{"city":"Paris"}` || calls[1].Function.Arguments != `{"timezone":"CET","hours":1}` {
		t.Errorf("accumulated tool calls %+v", calls)
	}
	if f := acc.Choices[0].FinishReason; f != "tool_calls" {
		t.Errorf("finish_reason %q, want tool_calls", f)
	}
}

func chatToolRoundTrip(t *testing.T, p *platform, client openai.Client) {
	messages := userPrompt("What is the weather in Paris?")
	first, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
		Model: "sim-tools", Messages: messages, Tools: weatherTools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Choices) != 1 || first.Choices[0].FinishReason != "tool_calls" || len(first.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("first answer is not one tool call: %s", first.RawJSON())
	}
	call := first.Choices[0].Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || !json.Valid([]byte(call.Function.Arguments)) || call.ID == "" {
		t.Fatalf("tool call %+v", call)
	}

	const output = `{"temp_c":21,"sky":"clear"}`
	messages = append(messages, first.Choices[0].Message.ToParam(), openai.ToolMessage(output, call.ID))
	mark := len(p.Sim.Requests())
	second, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
		Model: "sim-tools", Messages: messages, Tools: weatherTools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Choices) != 1 {
		t.Fatalf("%d choices", len(second.Choices))
	}
	if c := second.Choices[0]; !strings.Contains(c.Message.Content, output) || c.FinishReason != "stop" || len(c.Message.ToolCalls) != 0 {
		t.Errorf("answer after the tool result: content %q finish %q tool calls %d", c.Message.Content, c.FinishReason, len(c.Message.ToolCalls))
	}

	body := oneUpstreamCall(t, p, mark)
	items := body.Get("input").Array()
	var types []string
	for _, it := range items {
		types = append(types, it.Get("type").Str)
	}
	if len(items) != 3 || !isUserMessage(items[0]) || types[1] != "function_call" || types[2] != "function_call_output" {
		t.Fatalf("upstream input item types = %q, want user message, function_call, function_call_output:\n%s", types, body.Get("input").Raw)
	}
	fc, out := items[1], items[2]
	if fc.Get("call_id").Str != call.ID || fc.Get("name").Str != "get_weather" || fc.Get("arguments").Str != call.Function.Arguments {
		t.Errorf("function_call item %s does not carry the tool call %+v", fc.Raw, call)
	}
	if fc.Get("id").Exists() {
		t.Errorf("function_call item has an item id: %s", fc.Raw)
	}
	if out.Get("call_id").Str != call.ID || out.Get("output").Str != output {
		t.Errorf("function_call_output item = %s", out.Raw)
	}
}

func chatJSONSchema(t *testing.T, p *platform, client openai.Client) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city":   map[string]any{"type": "string"},
			"temp_c": map[string]any{"type": "integer"},
			"sunny":  map[string]any{"type": "boolean"},
			"tags":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
		"required":             []any{"city", "temp_c", "sunny", "tags"},
		"additionalProperties": false,
	}
	mark := len(p.Sim.Requests())
	resp, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
		Model:    "sim-json",
		Messages: userPrompt("Describe the weather in Paris as JSON."),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: "weather", Schema: schema, Strict: openai.Bool(true),
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %s", resp.RawJSON())
	}
	var got struct {
		City  *string   `json:"city"`
		TempC *int      `json:"temp_c"`
		Sunny *bool     `json:"sunny"`
		Tags  *[]string `json:"tags"`
	}
	dec := json.NewDecoder(strings.NewReader(resp.Choices[0].Message.Content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("content %q does not match the schema: %v", resp.Choices[0].Message.Content, err)
	}
	if got.City == nil || got.TempC == nil || got.Sunny == nil || got.Tags == nil {
		t.Errorf("content %q lacks required properties", resp.Choices[0].Message.Content)
	}

	body := oneUpstreamCall(t, p, mark)
	format := body.Get("text.format")
	if format.Get("type").Str != "json_schema" || format.Get("name").Str != "weather" || format.Get("strict").Type != gjson.True ||
		format.Get("json_schema").Exists() {
		t.Errorf("upstream text.format is not the flattened json_schema: %s", format.Raw)
	}
	var sent any
	if err := json.Unmarshal([]byte(format.Get("schema").Raw), &sent); err != nil {
		t.Fatalf("upstream schema: %v", err)
	}
	wantSchema, _ := json.Marshal(schema)
	var want any
	_ = json.Unmarshal(wantSchema, &want)
	if !reflect.DeepEqual(sent, want) {
		t.Errorf("upstream schema = %s, want %s", format.Get("schema").Raw, wantSchema)
	}
	if body.Get("response_format").Exists() {
		t.Error("response_format went upstream as well")
	}
}

// TestChatStopGoClient has a platform of its own: modelgate ends the upstream stream at the stop
// sequence, and the platform may charge a last delta after the client has its answer, which
// would blur the exact usage checks of the other tests.
func TestChatStopGoClient(t *testing.T) {
	p, g := startKeysGateway(t, "")
	client := sdkClient(g, alphaKey)
	// The stop word comes from the prompt, which the sim echoes, so where it falls is known; it
	// is longer than one upstream delta, so it spans delta boundaries.
	const prompt = "list bananas then apples then cherries"
	want := simAnswer("sim-chat", "list bananas then ")
	t.Run("non_stream", func(t *testing.T) {
		mark := len(p.Sim.Requests())
		resp, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
			Model: "sim-chat", Messages: userPrompt(prompt),
			Stop: openai.ChatCompletionNewParamsStopUnion{OfString: openai.String("apples")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("%d choices", len(resp.Choices))
		}
		if c := resp.Choices[0]; c.Message.Content != want || c.FinishReason != "stop" {
			t.Errorf("content %q finish %q, want %q stop", c.Message.Content, c.FinishReason, want)
		}
		if body := oneUpstreamCall(t, p, mark); body.Get("stop").Exists() {
			t.Errorf("stop went upstream: %s", body.Get("stop").Raw)
		}
	})
	t.Run("stream", func(t *testing.T) {
		log := streamChat(t, client, openai.ChatCompletionNewParams{
			Model: "sim-chat", Messages: userPrompt(prompt),
			Stop: openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"never-appears-xyz", "apples"}},
		})
		log.assertSameEnvelope(t, "sim-chat")
		if got := log.content(0); got != want {
			t.Errorf("streamed content %q, want %q", got, want)
		}
		if f := log.finishes(0); !slices.Equal(f, []string{"stop"}) {
			t.Errorf("finish reasons %v, want one stop", f)
		}
	})
	// sim-slow paces its events (50 ms apart) and the prompt puts a long tail after the stop
	// word, so the platform is far from done when the stop sequence appears. The platform
	// charges each delta as it sends it: what it charged by the time the client's answer has
	// ended shows whether modelgate ended the upstream request or read it to the end.
	slowPrompt := "halt right here, " + strings.Repeat("and then keep on talking ", 16)
	fullDeltas := int64(len(simAnswer("sim-slow", slowPrompt))+3) / 4
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "non_stream_ends_upstream", true: "stream_ends_upstream"}[stream]
		t.Run(name, func(t *testing.T) {
			mark, before := len(p.Sim.Requests()), p.Sim.Totals(p.Key)
			var content string
			if stream {
				// Read to the end of the body, as the SDK does not: a client leaving would
				// end the upstream request by itself and hide a gateway that reads on.
				raw := rawChatStream(t, g, alphaKey, `{"model":"sim-slow","stream":true,"stop":"halt","messages":[{"role":"user","content":"`+slowPrompt+`"}]}`)
				content = rawStreamContent(t, raw)
			} else {
				resp, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
					Model: "sim-slow", Messages: userPrompt(slowPrompt),
					Stop: openai.ChatCompletionNewParamsStopUnion{OfString: openai.String("halt")},
				})
				if err != nil {
					t.Fatal(err)
				}
				content = resp.Choices[0].Message.Content
			}
			if want := simAnswer("sim-slow", ""); content != want {
				t.Errorf("content %q, want %q", content, want)
			}
			if n := len(upstreamCalls(p, mark)); n != 1 {
				t.Fatalf("platform received %d requests, want 1", n)
			}
			if charged := chargedSince(p, before).OutputTokens; charged >= fullDeltas/2 {
				t.Errorf("the platform sent %d of %d deltas: the upstream request was not ended at the stop sequence", charged, fullDeltas)
			}
		})
	}
}

func chatN2(t *testing.T, p *platform, client openai.Client) {
	const prompt = "Two answers please"
	want := simAnswer("sim-chat", prompt)
	params := openai.ChatCompletionNewParams{Model: "sim-chat", Messages: userPrompt(prompt), N: openai.Int(2)}
	t.Run("non_stream", func(t *testing.T) {
		mark, before := len(p.Sim.Requests()), p.Sim.Totals(p.Key)
		resp, err := client.Chat.Completions.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 2 {
			t.Fatalf("%d choices, want 2", len(resp.Choices))
		}
		for i, c := range resp.Choices {
			if c.Index != int64(i) || c.Message.Content != want || c.FinishReason != "stop" {
				t.Errorf("choice %d: index %d content %q finish %q", i, c.Index, c.Message.Content, c.FinishReason)
			}
		}
		calls := upstreamCalls(p, mark)
		if len(calls) != 2 {
			t.Fatalf("platform received %d requests, want 2", len(calls))
		}
		for _, c := range calls {
			if n := gjson.GetBytes(c.Body, "n"); n.Exists() {
				t.Errorf("n went upstream: %s", n.Raw)
			}
		}
		charged := chargedSince(p, before)
		u := resp.Usage
		if u.PromptTokens != charged.InputTokens || u.CompletionTokens != charged.OutputTokens || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("usage %+v is not the sum the platform charged (%+v)", u, charged)
		}
		one := tokensOfOneAnswer(t, client, prompt)
		if u.PromptTokens != 2*one.PromptTokens || u.CompletionTokens != 2*one.CompletionTokens {
			t.Errorf("usage %d/%d is not twice one choice's %d/%d", u.PromptTokens, u.CompletionTokens, one.PromptTokens, one.CompletionTokens)
		}
	})
	t.Run("stream", func(t *testing.T) {
		mark := len(p.Sim.Requests())
		log := streamChat(t, client, params)
		log.assertSameEnvelope(t, "sim-chat")
		for i := range int64(2) {
			if got := log.content(i); got != want {
				t.Errorf("choice %d streamed %q, want %q", i, got, want)
			}
			if f := log.finishes(i); !slices.Equal(f, []string{"stop"}) {
				t.Errorf("choice %d finish reasons %v, want one stop", i, f)
			}
		}
		for i, ch := range log.chunks {
			for _, c := range ch.Choices {
				if c.Index != 0 && c.Index != 1 {
					t.Errorf("chunk %d has choice index %d", i, c.Index)
				}
			}
		}
		if u := log.usageChunks(); len(u) != 0 {
			t.Errorf("usage in chunks %v without include_usage", u)
		}
		if n := len(upstreamCalls(p, mark)); n != 2 {
			t.Errorf("platform received %d requests, want 2", n)
		}
	})
}

func tokensOfOneAnswer(t *testing.T, client openai.Client, prompt string) openai.CompletionUsage {
	t.Helper()
	resp, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim-chat", Messages: userPrompt(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Usage
}

func chatIncludeUsage(t *testing.T, p *platform, client openai.Client) {
	const prompt = "Count my tokens"
	for _, tc := range []struct {
		name    string
		n       int64
		include bool
	}{
		{"with_usage", 1, true},
		{"without_usage", 1, false},
		{"with_usage_n2", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "sim-chat", Messages: userPrompt(prompt)}
			if tc.n > 1 {
				params.N = openai.Int(tc.n)
			}
			if tc.include {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			before := p.Sim.Totals(p.Key)
			log := streamChat(t, client, params)
			usage := log.usageChunks()
			if !tc.include {
				if len(usage) != 0 {
					t.Errorf("usage chunks at %v without include_usage", usage)
				}
				for i, ch := range log.chunks {
					if len(ch.Choices) == 0 {
						t.Errorf("chunk %d has no choices: %s", i, ch.RawJSON())
					}
				}
				return
			}
			if len(usage) != 1 || usage[0] != len(log.chunks)-1 {
				t.Fatalf("usage chunks at %v of %d, want only the last", usage, len(log.chunks))
			}
			last := log.chunks[len(log.chunks)-1]
			if len(last.Choices) != 0 || !last.JSON.Choices.Valid() {
				t.Errorf("usage chunk choices = %s, want []", last.JSON.Choices.Raw())
			}
			empty := 0
			for _, ch := range log.chunks {
				if len(ch.Choices) == 0 {
					empty++
				}
			}
			if empty != 1 {
				t.Errorf("%d chunks without choices, want 1", empty)
			}
			u, charged := last.Usage, chargedSince(p, before)
			if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage = %+v", u)
			}
			if u.PromptTokens != charged.InputTokens || u.CompletionTokens != charged.OutputTokens {
				t.Errorf("usage %d/%d, platform charged %d/%d", u.PromptTokens, u.CompletionTokens, charged.InputTokens, charged.OutputTokens)
			}
			for i := range tc.n {
				if f := log.finishes(i); !slices.Equal(f, []string{"stop"}) {
					t.Errorf("choice %d finish reasons %v", i, f)
				}
			}
		})
	}
}

func chatErrors(t *testing.T, g *gateway, p *platform) {
	mark := len(p.Sim.Requests())
	for _, tc := range []struct {
		name      string
		key       string
		model     string
		opts      []option.RequestOption
		status    int
		code      string
		param     string
		wantParam bool
	}{
		{name: "unknown_key", key: "mg-not-in-config", model: "sim-chat", status: 401},
		{name: "model_not_allowed", key: betaKey, model: "sim-tools", status: 404, code: "model_not_found", param: "model", wantParam: true},
		{name: "alias_not_allowed", key: betaKey, model: "gpt-4o-mini", status: 404, code: "model_not_found", param: "model", wantParam: true},
		{name: "empty_messages", key: alphaKey, model: "sim-chat", status: 400, param: "messages", wantParam: true,
			opts: []option.RequestOption{option.WithJSONSet("messages", []any{})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := sdkClient(g, tc.key)
			params := openai.ChatCompletionNewParams{Model: tc.model, Messages: userPrompt("hello")}
			_, err := client.Chat.Completions.New(ctx(t), params, tc.opts...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not an *openai.Error", err)
			}
			if apiErr.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", apiErr.StatusCode, tc.status, apiErr.RawJSON())
			}
			if tc.code != "" && apiErr.Code != tc.code {
				t.Errorf("code %q, want %q", apiErr.Code, tc.code)
			}
			if tc.wantParam && apiErr.Param != tc.param {
				t.Errorf("param %q, want %q", apiErr.Param, tc.param)
			}
			if apiErr.Message == "" || apiErr.Type == "" {
				t.Errorf("error without message or type: %s", apiErr.RawJSON())
			}
			if strings.Contains(apiErr.RawJSON(), tc.key) {
				t.Error("the error echoes the client key")
			}
		})
	}
	if n := len(p.Sim.Requests()) - mark; n != 0 {
		t.Errorf("rejected requests reached the platform %d times", n)
	}
}

// chatOutcomes checks how the platform's other endings reach the client: a truncated answer is
// length, a refusal is a refusal, and a failed response is an error, never a finish reason.
func chatOutcomes(t *testing.T, client openai.Client) {
	const prompt = "tell me everything"
	for _, tc := range []struct {
		model   string
		content string // "" means empty
		refusal bool
		finish  string // "" means the request must fail
	}{
		{model: "sim-incomplete", content: "Hello from sim-incomplete.", finish: "length"},
		{model: "sim-refusal", refusal: true, finish: "stop"},
		{model: "sim-failed"},
	} {
		params := openai.ChatCompletionNewParams{Model: tc.model, Messages: userPrompt(prompt)}
		t.Run(tc.model+"/non_stream", func(t *testing.T) {
			resp, err := client.Chat.Completions.New(ctx(t), params)
			if tc.finish == "" {
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode < 500 || apiErr.Message == "" {
					t.Fatalf("a failed response gave %v, want a 5xx *openai.Error with a message", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			if c.FinishReason != tc.finish || !strings.HasPrefix(c.Message.Content, tc.content) || (c.Message.Refusal != "") != tc.refusal {
				t.Errorf("finish %q content %q refusal %q", c.FinishReason, c.Message.Content, c.Message.Refusal)
			}
			if tc.refusal && c.Message.Content != "" {
				t.Errorf("a refusal came with content %q", c.Message.Content)
			}
		})
		t.Run(tc.model+"/stream", func(t *testing.T) {
			stream := client.Chat.Completions.NewStreaming(ctx(t), params)
			defer stream.Close()
			log := &chunkLog{}
			var refusal strings.Builder
			for stream.Next() {
				ch := stream.Current()
				log.chunks = append(log.chunks, ch)
				for _, c := range ch.Choices {
					refusal.WriteString(c.Delta.Refusal)
				}
			}
			finishes := log.finishes(0)
			if tc.finish == "" {
				if stream.Err() == nil || len(finishes) != 0 {
					t.Errorf("a failed response streamed finish reasons %v and error %v, want an error only", finishes, stream.Err())
				}
				return
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(finishes, []string{tc.finish}) || !strings.HasPrefix(log.content(0), tc.content) || (refusal.Len() > 0) != tc.refusal {
				t.Errorf("finishes %v content %q refusal %q", finishes, log.content(0), refusal.String())
			}
		})
	}
}

// chatReasoning checks the reasoning summary arrives as reasoning_content, its parts joined by
// a blank line, alike in both modes, and is counted as reasoning tokens.
func chatReasoning(t *testing.T, client openai.Client) {
	const prompt = "think first"
	want := "Considering the request: " + prompt + "\n\nPlanning a short, direct answer."
	params := openai.ChatCompletionNewParams{Model: "sim-reasoning", Messages: userPrompt(prompt)}
	resp, err := client.Chat.Completions.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	var reasoning string
	if f, ok := msg.JSON.ExtraFields["reasoning_content"]; !ok || json.Unmarshal([]byte(f.Raw()), &reasoning) != nil || reasoning != want {
		t.Errorf("reasoning_content = %q, want %q", reasoning, want)
	}
	if msg.Content != simAnswer("sim-reasoning", prompt) {
		t.Errorf("content %q", msg.Content)
	}
	if resp.Usage.CompletionTokensDetails.ReasoningTokens <= 0 || resp.Usage.CompletionTokensDetails.ReasoningTokens >= resp.Usage.CompletionTokens {
		t.Errorf("reasoning tokens %d of %d completion tokens", resp.Usage.CompletionTokensDetails.ReasoningTokens, resp.Usage.CompletionTokens)
	}

	log := streamChat(t, client, params)
	var streamed strings.Builder
	for _, ch := range log.chunks {
		for _, c := range ch.Choices {
			if f, ok := c.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var part string
				if err := json.Unmarshal([]byte(f.Raw()), &part); err != nil {
					t.Fatalf("reasoning_content delta %s", f.Raw())
				}
				streamed.WriteString(part)
			}
		}
	}
	if streamed.String() != want || log.content(0) != msg.Content {
		t.Errorf("streamed reasoning %q content %q", streamed.String(), log.content(0))
	}
}

func TestResponsesGoClient(t *testing.T) {
	p, g := startKeysGateway(t, "")
	client := sdkClient(g, alphaKey)
	const prompt = "Hello over the Responses API"
	params := responses.ResponseNewParams{
		Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
	}
	want := simAnswer("sim-chat", prompt)

	t.Run("non_stream", func(t *testing.T) {
		mark, before := len(p.Sim.Requests()), p.Sim.Totals(p.Key)
		resp, err := client.Responses.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != "completed" || resp.OutputText() != want {
			t.Errorf("status %q text %q, want completed %q", resp.Status, resp.OutputText(), want)
		}
		charged := chargedSince(p, before)
		if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 ||
			resp.Usage.InputTokens != charged.InputTokens || resp.Usage.OutputTokens != charged.OutputTokens {
			t.Errorf("usage %d/%d, platform charged %d/%d", resp.Usage.InputTokens, resp.Usage.OutputTokens, charged.InputTokens, charged.OutputTokens)
		}
		body := oneUpstreamCall(t, p, mark)
		if body.Get("model").Str != "sim-chat" || body.Get("input").Str != prompt {
			t.Errorf("upstream body %s: want model sim-chat and the input unchanged", body.Raw)
		}
	})

	t.Run("stream", func(t *testing.T) {
		mark := len(p.Sim.Requests())
		stream := client.Responses.NewStreaming(ctx(t), params)
		defer stream.Close()
		var (
			types    []string
			text     strings.Builder
			lastSeq  int64 = -1
			final    responses.Response
			finalSet bool
		)
		for stream.Next() {
			ev := stream.Current()
			if len(types) == 0 || types[len(types)-1] != ev.Type {
				types = append(types, ev.Type)
			}
			if ev.SequenceNumber <= lastSeq {
				t.Errorf("sequence number %d after %d", ev.SequenceNumber, lastSeq)
			}
			lastSeq = ev.SequenceNumber
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.AsResponseOutputTextDelta().Delta)
			case "response.completed":
				final, finalSet = ev.AsResponseCompleted().Response, true
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream error after %v: %v", types, err)
		}
		wantTypes := []string{
			"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done",
			"response.output_item.done", "response.completed",
		}
		if !slices.Equal(types, wantTypes) {
			t.Errorf("event types (runs collapsed) = %v\nwant %v", types, wantTypes)
		}
		if text.String() != want {
			t.Errorf("deltas %q, want %q", text.String(), want)
		}
		if !finalSet || final.OutputText() != want || final.Usage.InputTokens <= 0 || final.Usage.OutputTokens <= 0 ||
			final.Usage.TotalTokens != final.Usage.InputTokens+final.Usage.OutputTokens {
			t.Errorf("response.completed: seen %v text %q usage %+v", finalSet, final.OutputText(), final.Usage)
		}
		if body := oneUpstreamCall(t, p, mark); !body.Get("stream").Bool() || body.Get("model").Str != "sim-chat" {
			t.Errorf("upstream body %s: want a sim-chat stream", body.Raw)
		}
	})
	g.assertNoSecret(t, p.Key)
}

package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
)

// Keys of messagesConfig: spentKey's team has a daily budget one answer uses up.
const spentKey = "mg-e2e-spent"

// messagesConfig is a keys-mode config for the Messages tests: team alpha without limits,
// team spent with a small daily token budget, and keep-alive pings every 20 ms.
func messagesConfig(p *platform) string {
	return gatewayYAML{
		upstream: "  keepalive_interval: 20ms\n",
		models:   "  - id: claude-test\n    upstream: sim-chat\n  - id: sim-chat\n  - id: sim-tools\n  - id: sim-reasoning\n  - id: sim-slow\n  - id: sim-error-event\n",
		teams:    alphaTeam("") + spentTeam,
		more:     adminKeys,
	}.render(p)
}

func messagesEnv(p *platform) map[string]string {
	return map[string]string{"PLATFORM_API_KEY": p.Key, "ALPHA_KEY": alphaKey, "SPENT_KEY": spentKey, "ADMIN_KEY": adminKey}
}

func anthropicClient(g *gateway, key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(g.URL), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second))
}

func userText(s string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(s))}
}

// streamMessage runs a Messages stream to its end, accumulating as the SDK documents, and
// returns the message, the event types in order and the stream's error.
func streamMessage(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, []string, error) {
	t.Helper()
	stream := c.Messages.NewStreaming(ctx(t), params)
	defer stream.Close()
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		name := ev.Type
		if ev.Type == "content_block_delta" {
			name += "/" + ev.Delta.Type
		}
		types = append(types, name)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
	}
	return msg, types, stream.Err()
}

func countOf(types []string, name string) int {
	n := 0
	for _, ty := range types {
		if ty == name {
			n++
		}
	}
	return n
}

func weatherTool() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        "get_weather",
		Description: anthropic.String("Current weather in a city"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}},
			Required:   []string{"city"},
		},
	}}}
}

func asAPIError(t *testing.T, err error) *anthropic.Error {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T) is not an *anthropic.Error", err, err)
	}
	return apiErr
}

func TestMessagesGoClient(t *testing.T) {
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: messagesConfig(p), Env: messagesEnv(p)})
	client := anthropicClient(g, alphaKey)

	t.Run("text", func(t *testing.T) {
		mark := len(p.Sim.Requests())
		msg, err := client.Messages.New(ctx(t), anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: 256,
			System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
			Messages: userText("Hello from Go"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != simAnswer("sim-chat", "Hello from Go") {
			t.Fatalf("content %+v", msg.Content)
		}
		if msg.StopReason != anthropic.StopReasonEndTurn || msg.Model != "claude-test" || !strings.HasPrefix(msg.ID, "msg_") || msg.Role != "assistant" {
			t.Errorf("message %s", msg.RawJSON())
		}
		if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
			t.Errorf("usage %+v", msg.Usage)
		}
		up := oneUpstreamCall(t, p, mark)
		if up.Get("model").Str != "sim-chat" || up.Get("max_output_tokens").Int() != 256 || up.Get("store").Type != gjson.False {
			t.Errorf("upstream body %s", up.Raw)
		}
		if first := up.Get("input.0"); first.Get("role").Str != "system" || !strings.Contains(first.Get("content").Raw, "Be brief.") {
			t.Errorf("system prompt is not the leading input item: %s", first.Raw)
		}
	})

	t.Run("stream final message", func(t *testing.T) {
		msg, types, err := streamMessage(t, client, anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: 256, Messages: userText("Stream to Go"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if types[0] != "message_start" || types[len(types)-1] != "message_stop" || countOf(types, "message_delta") != 1 {
			t.Errorf("event order %v", types)
		}
		if countOf(types, "content_block_delta/text_delta") < 3 {
			t.Errorf("the answer was not streamed in pieces: %v", types)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != simAnswer("sim-chat", "Stream to Go") || msg.StopReason != anthropic.StopReasonEndTurn {
			t.Fatalf("final message %s", msg.RawJSON())
		}
		if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
			t.Errorf("usage %+v", msg.Usage)
		}
	})

	t.Run("tool round trip", func(t *testing.T) {
		params := anthropic.MessageNewParams{
			Model: "sim-tools", MaxTokens: 256, Tools: weatherTool(),
			ToolChoice: anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}},
			Messages:   userText("What is the weather in Paris?"),
		}
		first, err := client.Messages.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if first.StopReason != anthropic.StopReasonToolUse || len(first.Content) != 1 || first.Content[0].Type != "tool_use" {
			t.Fatalf("first answer %s", first.RawJSON())
		}
		call := first.Content[0]
		var input map[string]string
		if err := json.Unmarshal(call.Input, &input); err != nil || input["city"] == "" || call.Name != "get_weather" {
			t.Fatalf("tool input %s (%v)", call.Input, err)
		}
		mark := len(p.Sim.Requests())
		params.Messages = append(params.Messages, first.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "18 degrees and sunny", false)))
		second, err := client.Messages.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if second.StopReason != anthropic.StopReasonEndTurn || len(second.Content) != 1 || !strings.Contains(second.Content[0].Text, "The tool returned: 18 degrees and sunny") {
			t.Fatalf("second answer %s", second.RawJSON())
		}
		up := oneUpstreamCall(t, p, mark)
		calls := findItems(up, func(it gjson.Result) bool { return it.Get("type").Str == "function_call" })
		outs := findItems(up, func(it gjson.Result) bool { return it.Get("type").Str == "function_call_output" })
		if len(calls) != 1 || len(outs) != 1 || calls[0].Get("call_id").Str != call.ID || outs[0].Get("call_id").Str != call.ID {
			t.Errorf("upstream history %s", up.Get("input").Raw)
		}
		if up.Get("parallel_tool_calls").Type != gjson.False {
			t.Errorf("disable_parallel_tool_use did not reach the platform: %s", up.Raw)
		}
	})

	t.Run("streamed tool call", func(t *testing.T) {
		msg, types, err := streamMessage(t, client, anthropic.MessageNewParams{
			Model: "sim-tools", MaxTokens: 256, Tools: weatherTool(), Messages: userText("Weather in Rome?"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if countOf(types, "content_block_delta/input_json_delta") < 2 {
			t.Errorf("arguments were not streamed as input_json_delta: %v", types)
		}
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" {
			t.Fatalf("final message %s", msg.RawJSON())
		}
		var input map[string]string
		if err := json.Unmarshal(msg.Content[0].Input, &input); err != nil || input["city"] == "" {
			t.Errorf("accumulated input %s (%v)", msg.Content[0].Input, err)
		}
	})

	t.Run("thinking out and back in", func(t *testing.T) {
		params := anthropic.MessageNewParams{
			Model: "sim-chat", MaxTokens: 2048, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
			Messages: userText("Think first"),
		}
		msg, types, err := streamMessage(t, client, params)
		if err != nil {
			t.Fatal(err)
		}
		if countOf(types, "content_block_delta/thinking_delta") == 0 || countOf(types, "content_block_delta/signature_delta") != 1 {
			t.Errorf("thinking events %v", types)
		}
		if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[1].Type != "text" {
			t.Fatalf("final message %s", msg.RawJSON())
		}
		th := msg.Content[0]
		if !strings.Contains(th.Thinking, "Think first") || !strings.HasPrefix(th.Signature, "mgsig1.") {
			t.Errorf("thinking block %s", th.RawJSON())
		}
		mark := len(p.Sim.Requests())
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And now?")))
		next, err := client.Messages.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if len(next.Content) != 2 || next.Content[0].Type != "thinking" {
			t.Errorf("second answer %s", next.RawJSON())
		}
		up := oneUpstreamCall(t, p, mark)
		rs := findItems(up, func(it gjson.Result) bool { return it.Get("type").Str == "reasoning" })
		if len(rs) != 1 || !strings.HasPrefix(rs[0].Get("encrypted_content").Str, "enc_rs_") || rs[0].Get("summary.0.text").Str != th.Thinking {
			t.Errorf("the reasoning did not go back to the platform: %s", up.Get("input").Raw)
		}
		if up.Get("thinking.type").Str != "enabled" || up.Get("reasoning.summary").Str != "auto" {
			t.Errorf("thinking request %s", up.Raw)
		}
	})

	t.Run("stop sequences", func(t *testing.T) {
		params := anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: 256, StopSequences: []string{"beta"}, Messages: userText("alpha beta gamma"),
		}
		want := "Hello from sim-chat. You said: alpha "
		mark := len(p.Sim.Requests())
		msg, err := client.Messages.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		// Served from an upstream stream, so the platform can be stopped at the sequence.
		if up := oneUpstreamCall(t, p, mark); up.Get("stream").Type != gjson.True {
			t.Errorf("a non-stream call with stop sequences was not streamed upstream: %s", up.Raw)
		}
		if msg.Content[0].Text != want || msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != "beta" {
			t.Errorf("non-stream %s", msg.RawJSON())
		}
		smsg, _, err := streamMessage(t, client, params)
		if err != nil {
			t.Fatal(err)
		}
		if smsg.Content[0].Text != want || smsg.StopReason != anthropic.StopReasonStopSequence || smsg.StopSequence != "beta" {
			t.Errorf("stream %s", smsg.RawJSON())
		}
	})

	t.Run("count_tokens", func(t *testing.T) {
		msgs := userText("How many tokens is this?")
		mark := len(p.Sim.Requests())
		n, err := client.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{Model: "claude-test", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(upstreamCalls(p, mark)); got != 0 {
			t.Fatalf("count_tokens sent %d requests upstream", got)
		}
		msg, err := client.Messages.New(ctx(t), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 64, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		// The simulated platform bills with the same estimate, so the two must agree.
		if n.InputTokens <= 0 || n.InputTokens != msg.Usage.InputTokens {
			t.Errorf("count_tokens %d, the call's input_tokens %d", n.InputTokens, msg.Usage.InputTokens)
		}
	})

	t.Run("bad key", func(t *testing.T) {
		mark := len(p.Sim.Requests())
		bad := anthropicClient(g, "mg-wrong")
		_, err := bad.Messages.New(ctx(t), anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: 64, Messages: userText("hi"),
		})
		apiErr := asAPIError(t, err)
		if apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
			t.Errorf("status %d type %q", apiErr.StatusCode, apiErr.Type())
		}
		if len(p.Sim.Requests()) != mark {
			t.Error("a request with a bad key reached the platform")
		}
	})

	t.Run("missing max_tokens", func(t *testing.T) {
		mark := len(p.Sim.Requests())
		_, err := client.Messages.New(ctx(t), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 64, Messages: userText("hi")},
			option.WithJSONDel("max_tokens"))
		apiErr := asAPIError(t, err)
		if apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" || !strings.Contains(apiErr.RawJSON(), "max_tokens") {
			t.Errorf("status %d type %q body %s", apiErr.StatusCode, apiErr.Type(), apiErr.RawJSON())
		}
		if len(p.Sim.Requests()) != mark {
			t.Error("an invalid request reached the platform")
		}
	})

	t.Run("mid-stream platform failure", func(t *testing.T) {
		msg, types, err := streamMessage(t, client, anthropic.MessageNewParams{
			Model: "sim-error-event", MaxTokens: 64, Messages: userText("fail please"),
		})
		if err == nil {
			t.Fatalf("the stream ended without an error: %v %s", types, msg.RawJSON())
		}
		if countOf(types, "content_block_delta/text_delta") == 0 || countOf(types, "message_stop") != 0 {
			t.Errorf("events before the failure %v", types)
		}
		if apiErr := asAPIError(t, err); apiErr.Type() != "api_error" {
			t.Errorf("error type %q: %v", apiErr.Type(), err)
		}
	})

	t.Run("spent daily budget", func(t *testing.T) {
		spent := anthropicClient(g, spentKey)
		if _, err := spent.Messages.New(ctx(t), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 16, Messages: userText(strings.Repeat("spend the day ", 40))}); err != nil {
			t.Fatal(err)
		}
		mark := len(p.Sim.Requests())
		_, err := spent.Messages.New(ctx(t), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 16, Messages: userText("again")})
		apiErr := asAPIError(t, err)
		if apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" {
			t.Fatalf("status %d type %q", apiErr.StatusCode, apiErr.Type())
		}
		h := apiErr.Response.Header
		if h.Get("X-Should-Retry") != "false" || h.Get("Retry-After") == "" {
			t.Errorf("retry headers %v", h)
		}
		if _, err := time.Parse(time.RFC3339, h.Get("Anthropic-Ratelimit-Tokens-Reset")); err != nil || h.Get("Anthropic-Ratelimit-Tokens-Remaining") != "0" {
			t.Errorf("anthropic rate-limit headers %v", h)
		}
		if len(p.Sim.Requests()) != mark {
			t.Error("a refused request reached the platform")
		}
	})

	t.Run("ping while idle", func(t *testing.T) {
		raw := rawMessages(t, g, alphaKey, `{"model":"sim-slow","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"slowly"}]}`)
		if !strings.Contains(raw, "event: ping\ndata: {\"type\":\"ping\"}\n\n") || !strings.HasSuffix(raw, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
			t.Errorf("stream %q", raw)
		}
	})

	t.Run("models", func(t *testing.T) {
		var ids []string
		pager := client.Models.ListAutoPaging(ctx(t), anthropic.ModelListParams{})
		for pager.Next() {
			ids = append(ids, pager.Current().ID)
		}
		if err := pager.Err(); err != nil || strings.Join(ids, ",") != "claude-test,sim-chat,sim-tools,sim-reasoning,sim-slow,sim-error-event" {
			t.Fatalf("models %v (%v)", ids, err)
		}
		m, err := client.Models.Get(ctx(t), "claude-test", anthropic.ModelGetParams{})
		if err != nil || m.ID != "claude-test" || m.Type != "model" {
			t.Errorf("model %+v (%v)", m, err)
		}
	})

	t.Run("metrics and logs", func(t *testing.T) {
		_, _, b := apitest.Do(t, "GET", g.URL+"/metrics", "", nil)
		if !bytes.Contains(b, []byte(`route="/v1/messages"`)) {
			t.Error("no metrics series for route /v1/messages")
		}
		if !strings.Contains(g.Output.String(), `route=/v1/messages`) {
			t.Error("the request log has no /v1/messages line")
		}
		_, _, b = apitest.Do(t, "GET", g.URL+"/admin/usage", adminKey, nil)
		spent := gjson.GetBytes(b, `teams.#(name=="spent").usage`)
		if spent.Get("day_requests").Int() != 1 || spent.Get("day_input_tokens").Int() <= 0 || spent.Get("day_output_tokens").Int() <= 0 {
			t.Errorf("/admin/usage for the spent team: %s", spent.Raw)
		}
	})
	g.assertNoSecret(t, p.Key)
	g.assertNoSecret(t, alphaKey)
}

// rawMessages posts a Messages body with x-api-key and returns the whole answer.
func rawMessages(t *testing.T, g *gateway, key, body string) string {
	t.Helper()
	status, _, b := apitest.DoContext(t, ctx(t), "POST", g.URL+"/v1/messages", "", strings.NewReader(body),
		"x-api-key", key, "anthropic-version", "2023-06-01")
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	return string(b)
}

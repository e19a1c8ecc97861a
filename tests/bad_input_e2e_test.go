package tests

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"modelgate/apitest"
)

// TestBadInputRefusedLocally: what OpenAI would refuse before generating anything is refused
// by modelgate the same way, as the official client reads it, and never reaches the platform:
// n over translate.max_n, the tool_choice cases, and a gzip bomb.
func TestBadInputRefusedLocally(t *testing.T) {
	p, g := startKeysGateway(t, "translate:\n  max_n: 4\n")
	client := sdkClient(g, alphaKey)
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	tool := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "lookup"})
	mark := len(p.Sim.Requests())

	cases := []struct {
		name, param, says string
		call              func() error
	}{
		{"n_over_cap", "n", "at most 4", func() error {
			_, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs, N: openai.Int(5)})
			return err
		}},
		{"required_without_tools", "tool_choice", "required", func() error {
			_, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
				Model: "gpt-4o-mini", Messages: msgs,
				ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			})
			return err
		}},
		{"named_tool_not_declared", "tool_choice", "'search'", func() error {
			_, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
				Model: "gpt-4o-mini", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{tool},
				ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "search"}),
			})
			return err
		}},
		{"responses_required_without_tools", "tool_choice", "required", func() error {
			_, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
				Model: "gpt-4o-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
				ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
			})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("want an API error, got %v", err)
			}
			if apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != c.param || !strings.Contains(apiErr.Message, c.says) {
				t.Fatalf("got %d param %q: %s", apiErr.StatusCode, apiErr.Param, apiErr.Message)
			}
		})
	}

	t.Run("gzip_bomb", func(t *testing.T) {
		// 64 MiB of zeros is about 64 KiB gzipped; the default limit is 32 MiB inflated.
		var body bytes.Buffer
		zw := gzip.NewWriter(&body)
		zw.Write([]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`))
		zeros := make([]byte, 1<<20)
		for range 64 {
			zw.Write(zeros)
		}
		zw.Close()
		status, _, b := apitest.Do(t, http.MethodPost, g.URL+"/v1/chat/completions", alphaKey, &body, "Content-Encoding", "gzip")
		if status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413: %.300s", status, b)
		}
	})
	if n := len(upstreamCalls(p, mark)); n != 0 {
		t.Fatalf("refused requests reached the platform %d times", n)
	}
}

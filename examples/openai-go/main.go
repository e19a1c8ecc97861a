// Command openai-go streams a chat answer through modelgate with the official Go SDK.
//
//	OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY go run ./examples/openai-go
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/openai/openai-go/v3"
)

func main() {
	client := openai.NewClient() // reads OPENAI_BASE_URL and OPENAI_API_KEY
	model := os.Getenv("MODEL")
	if model == "" {
		model = "gpt-4o-mini"
	}
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello to modelgate.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 {
			fmt.Print(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "\nstream failed:", err)
		os.Exit(1)
	}
	fmt.Printf("\n[%s] %d in, %d out\n", acc.Choices[0].FinishReason, acc.Usage.PromptTokens, acc.Usage.CompletionTokens)
}

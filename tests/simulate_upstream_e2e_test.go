package tests

import (
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestSimulateUpstreamProtocols: --simulate-upstream makes the embedded platform serve each
// protocol, and modelgate speaks it: a chat stream and a Responses call go through, and the
// platform's log line of its first request names HTTP/2 for h2 (TLS with a certificate made
// at start) and h2c, HTTP/1.1 for the default. Nothing of it reaches the clients' answers.
func TestSimulateUpstreamProtocols(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		want  string // the protocol the platform saw
		other string // the one it must not have seen
	}{
		{"default", nil, "HTTP/1.1", "HTTP/2.0"},
		{"h2", []string{"--simulate-upstream", "h2"}, "HTTP/2.0", "HTTP/1.1"},
		{"h2c", []string{"--simulate-upstream", "h2c"}, "HTTP/2.0", "HTTP/1.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := "ratelimit:\n  data_path: " + t.TempDir() + "\n"
			g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Args: append([]string{"--simulate", "--log-format", "json"}, tc.args...)})
			client := sdkClient(g, "any-key")

			chat := client.Chat.Completions.NewStreaming(ctx(t), openai.ChatCompletionNewParams{
				Model:    "sim-chat",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("over which protocol")},
			})
			var text strings.Builder
			for chat.Next() {
				for _, ch := range chat.Current().Choices {
					text.WriteString(ch.Delta.Content)
				}
			}
			if err := chat.Err(); err != nil || text.String() != simAnswer("sim-chat", "over which protocol") {
				t.Fatalf("chat stream: %q, %v", text.String(), err)
			}
			chat.Close()

			var raw *http.Response
			resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
				Model: "sim-chat",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and this one")},
			}, option.WithResponseInto(&raw))
			if err != nil || resp.OutputText() != simAnswer("sim-chat", "and this one") {
				t.Fatalf("responses: %v", err)
			}
			for name, vs := range raw.Header {
				for _, v := range vs {
					if strings.Contains(v, "HTTP/") {
						t.Errorf("the upstream protocol leaked into header %s: %q", name, v)
					}
				}
			}

			logs := g.Output.String()
			first := `"msg":"simulated platform: first request","protocol":"`
			if !strings.Contains(logs, first+tc.want+`"`) {
				t.Errorf("no first request over %s in the log:\n%s", tc.want, logs)
			}
			if strings.Contains(logs, first+tc.other+`"`) {
				t.Errorf("the platform also saw %s:\n%s", tc.other, logs)
			}
		})
	}
}

package tests

import (
	"math"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// TestWeightedRoutesE2E: the binary splits a 3:1 model between two platform models, as the
// platform sees it; the client reads its own model id back, and a sticky user keeps one route
// for all its calls.
func TestWeightedRoutesE2E(t *testing.T) {
	p := startPlatform(t)
	cfg := gatewayYAML{
		models: `  - id: ab
    routes: [{upstream: sim-chat, weight: 3}, {upstream: sim-next, weight: 1}]
  - id: ab-user
    routes: [{upstream: sim-chat, weight: 1}, {upstream: sim-next, weight: 1}]
    sticky: user
`,
		teams: alphaTeam(""),
	}.render(p)
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: map[string]string{"PLATFORM_API_KEY": p.Key, "ALPHA_KEY": alphaKey}})
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(alphaKey), option.WithMaxRetries(0))
	const calls = 400
	for range calls {
		got, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
			Model:    "ab",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Model != "ab" {
			t.Fatalf("the answer names %q, want the client's ab", got.Model)
		}
	}
	counts := map[string]int{}
	for _, r := range upstreamCalls(p, 0) {
		counts[gjson.GetBytes(r.Body, "model").Str]++
	}
	// 400 calls at 25%: one standard deviation is 2.2 points; 9 points is far outside chance.
	if share := float64(counts["sim-next"]) / calls; len(counts) != 2 || math.Abs(share-0.25) > 0.09 {
		t.Fatalf("the platform received %v, want about 1 in 4 on sim-next", counts)
	}

	mark := len(p.Sim.Requests())
	for range 10 {
		_, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{
			Model:    "ab-user",
			User:     openai.String("end-user-7"),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var sticky []string
	for _, r := range upstreamCalls(p, mark) {
		sticky = append(sticky, gjson.GetBytes(r.Body, "model").Str)
	}
	for _, m := range sticky {
		if m != sticky[0] {
			t.Fatalf("one user's calls went to %v: want one route", sticky)
		}
	}
	if !strings.Contains(g.Output.String(), `upstream_model`) {
		t.Errorf("no log line names the route's upstream_model:\n%s", g.Output.String())
	}
}

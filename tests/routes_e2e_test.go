package tests

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
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

// TestSessionAffinityE2E: through the binary, with the openai Go client setting
// x-session-id as an agent does, each session keeps its 20 calls (each with a new first
// message) on one route of a sticky: conversation model, and the sessions use both routes.
func TestSessionAffinityE2E(t *testing.T) {
	p := startPlatform(t)
	cfg := gatewayYAML{
		models: `  - id: ab-convo
    routes: [{upstream: sim-chat, weight: 1}, {upstream: sim-next, weight: 1}]
    sticky: conversation
`,
		teams: alphaTeam(""),
	}.render(p)
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: map[string]string{"PLATFORM_API_KEY": p.Key, "ALPHA_KEY": alphaKey}})
	seen := map[string]bool{}
	for s := range 8 {
		session := fmt.Sprintf("0199c2e1-session-%d", s)
		client := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(alphaKey), option.WithMaxRetries(0),
			option.WithHeader("x-session-id", session))
		mark := len(p.Sim.Requests())
		for i := range 20 {
			_, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
				Model: "ab-convo",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("session %d call %d", s, i))},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var routes []string
		for _, r := range upstreamCalls(p, mark) {
			routes = append(routes, gjson.GetBytes(r.Body, "model").Str)
		}
		if len(routes) != 20 {
			t.Fatalf("session %d: %d platform calls, want 20", s, len(routes))
		}
		for _, m := range routes {
			if m != routes[0] {
				t.Fatalf("session %d went to %v: want one route for its 20 calls", s, routes)
			}
		}
		seen[routes[0]] = true
	}
	if len(seen) != 2 {
		t.Fatalf("8 sessions all went to %v", seen)
	}
}

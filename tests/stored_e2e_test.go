package tests

import (
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"modelgate/redisconn/redistest"
)

// These tests hold conversations through modelgate with previous_response_id, the way a
// Responses-native application does with the official Go client, and check at the platform
// that every earlier turn was sent.

// storedParams is a turn of a conversation.
func storedParams(prompt, previous string) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
	}
	if previous != "" {
		p.PreviousResponseID = openai.String(previous)
	}
	return p
}

// streamedTurn sends a turn as a stream and returns the terminal event's response.
func streamedTurn(t *testing.T, client openai.Client, params responses.ResponseNewParams) responses.Response {
	t.Helper()
	stream := client.Responses.NewStreaming(ctx(t), params)
	var final responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if final.ID == "" {
		t.Fatal("stream ended without response.completed")
	}
	return final
}

// conversationTexts is the role:text of every input item the platform received last.
func conversationTexts(t *testing.T, p *platform, mark int) []string {
	t.Helper()
	body := oneUpstreamCall(t, p, mark)
	if body.Get("previous_response_id").Exists() {
		t.Errorf("previous_response_id reached the platform: %s", body.Get("previous_response_id").Raw)
	}
	var out []string
	for _, it := range body.Get("input").Array() {
		out = append(out, it.Get("role").Str+":"+itemText(it))
	}
	return out
}

func notFound(err error) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound
}

func TestStoredConversationGoClient(t *testing.T) {
	p, g := startKeysGateway(t, "")
	alpha, alpha2, beta := sdkClient(g, alphaKey), sdkClient(g, alpha2Key), sdkClient(g, betaKey)

	// Three turns, the second streamed; each continues the one before.
	params := storedParams("first", "")
	params.Instructions = openai.String("Answer briefly.")
	r1, err := alpha.Responses.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	mark := len(p.Sim.Requests())
	r2 := streamedTurn(t, alpha, storedParams("second", r1.ID))
	if got := conversationTexts(t, p, mark); strings.Join(got, "|") != "user:first|assistant:"+simAnswer("sim-chat", "first")+"|user:second" {
		t.Errorf("second turn sent %q", got)
	}
	if oneUpstreamCall(t, p, mark).Get("instructions").Exists() {
		t.Error("the first turn's instructions were carried over")
	}
	mark = len(p.Sim.Requests())
	r3, err := alpha.Responses.New(ctx(t), storedParams("third", r2.ID))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"user:first", "assistant:" + simAnswer("sim-chat", "first"),
		"user:second", "assistant:" + simAnswer("sim-chat", "second"),
		"user:third",
	}
	if got := conversationTexts(t, p, mark); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("third turn sent\n got %q\nwant %q", got, want)
	}
	if r3.OutputText() != simAnswer("sim-chat", "third") {
		t.Errorf("third answer %q", r3.OutputText())
	}

	// Retrieve and input items through another key of the same team.
	got, err := alpha2.Responses.Get(ctx(t), r2.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r2.ID || got.Status != "completed" || got.OutputText() != simAnswer("sim-chat", "second") || got.PreviousResponseID != r1.ID {
		t.Errorf("retrieved %s status %s text %q previous %q", got.ID, got.Status, got.OutputText(), got.PreviousResponseID)
	}
	page, err := alpha2.Responses.InputItems.List(ctx(t), r3.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].Type != "message" || page.Data[0].ID == "" ||
		gjson.Get(page.Data[0].RawJSON(), "content.0.text").Str != "third" || page.HasMore {
		t.Errorf("input items: %s", page.RawJSON())
	}

	// Another team: 404 on every route, and no continuation, with nothing sent upstream.
	mark = len(p.Sim.Requests())
	if _, err := beta.Responses.Get(ctx(t), r3.ID, responses.ResponseGetParams{}); !notFound(err) {
		t.Errorf("another team's GET: %v", err)
	}
	if _, err := beta.Responses.InputItems.List(ctx(t), r3.ID, responses.InputItemListParams{}); !notFound(err) {
		t.Errorf("another team's input_items: %v", err)
	}
	if err := beta.Responses.Delete(ctx(t), r3.ID); !notFound(err) {
		t.Errorf("another team's DELETE: %v", err)
	}
	params = storedParams("steal", r3.ID)
	params.Model = "sim-chat"
	_, err = beta.Responses.New(ctx(t), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "previous_response_not_found" {
		t.Errorf("another team continuing: %v", err)
	}
	// An unknown id, too.
	if _, err := alpha.Responses.New(ctx(t), storedParams("x", "resp_unknown")); !errors.As(err, &apiErr) || apiErr.Code != "previous_response_not_found" {
		t.Errorf("unknown id: %v", err)
	}
	if n := len(upstreamCalls(p, mark)); n != 0 {
		t.Errorf("%d refused requests reached the platform", n)
	}

	// store:false is not kept.
	params = storedParams("forget", "")
	params.Store = openai.Bool(false)
	forgotten, err := alpha.Responses.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alpha.Responses.Get(ctx(t), forgotten.ID, responses.ResponseGetParams{}); !notFound(err) {
		t.Errorf("store:false response retrievable: %v", err)
	}

	// Delete, then it is gone for everyone in the team.
	if err := alpha2.Responses.Delete(ctx(t), r3.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alpha.Responses.Get(ctx(t), r3.ID, responses.ResponseGetParams{}); !notFound(err) {
		t.Errorf("deleted response retrievable: %v", err)
	}
	g.assertNoSecret(t, p.Key)
}

// TestStoredConversationSurvivesRestart: a conversation kept in the embedded store goes on
// after modelgate was stopped and started again.
func TestStoredConversationSurvivesRestart(t *testing.T) {
	p := startPlatform(t)
	cfg := strings.Replace(keysConfig(p, ""), "data_path: data", "data_path: "+t.TempDir(), 1)
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	client := sdkClient(g, alphaKey)
	r1, err := client.Responses.New(ctx(t), storedParams("before the restart", ""))
	if err != nil {
		t.Fatal(err)
	}
	g.Signal(t, syscall.SIGTERM)
	if code := g.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("modelgate exited with %d", code)
	}

	g = startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	mark := len(p.Sim.Requests())
	client = sdkClient(g, alpha2Key)
	if _, err := client.Responses.New(ctx(t), storedParams("after it", r1.ID)); err != nil {
		t.Fatal(err)
	}
	want := "user:before the restart|assistant:" + simAnswer("sim-chat", "before the restart") + "|user:after it"
	if got := conversationTexts(t, p, mark); strings.Join(got, "|") != want {
		t.Errorf("after the restart sent %q", got)
	}
}

// TestStoredConversationAcrossReplicas: two modelgate processes sharing one Redis; a turn
// made on one continues on the other, and either serves the conversation.
func TestStoredConversationAcrossReplicas(t *testing.T) {
	addr := redistest.Start(t).Addr
	p := startPlatform(t)
	cfg := strings.Replace(keysConfig(p, ""), "ratelimit:\n", "ratelimit:\n  store: redis://"+addr+"/0\n", 1)
	a := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	b := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})

	onA, onB := sdkClient(a, alphaKey), sdkClient(b, alphaKey)
	r1, err := onA.Responses.New(ctx(t), storedParams("on replica a", ""))
	if err != nil {
		t.Fatal(err)
	}
	mark := len(p.Sim.Requests())
	r2 := streamedTurn(t, onB, storedParams("on replica b", r1.ID))
	want := "user:on replica a|assistant:" + simAnswer("sim-chat", "on replica a") + "|user:on replica b"
	if got := conversationTexts(t, p, mark); strings.Join(got, "|") != want {
		t.Errorf("replica b sent %q", got)
	}
	got, err := onA.Responses.Get(ctx(t), r2.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != simAnswer("sim-chat", "on replica b") {
		t.Fatalf("replica a serving replica b's turn: %v", err)
	}
	if err := onB.Responses.Delete(ctx(t), r1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := onA.Responses.Get(ctx(t), r1.ID, responses.ResponseGetParams{}); !notFound(err) {
		t.Errorf("deleted on b, still served by a: %v", err)
	}
}

// sawConversation reports whether the platform received one request whose input held the
// user turns in this order, each earlier one followed by the simulated answer to it: a
// conversation continued by previous_response_id, sent whole.
func sawConversation(p *platform, upstreamModel string, turns ...string) bool {
	var want []string
	for i, turn := range turns {
		want = append(want, "user:"+turn)
		if i < len(turns)-1 {
			want = append(want, "assistant:"+simAnswer(upstreamModel, turn))
		}
	}
	for _, r := range upstreamCalls(p, 0) {
		var got []string
		for _, it := range gjson.GetBytes(r.Body, "input").Array() {
			got = append(got, it.Get("role").Str+":"+itemText(it))
		}
		if strings.Join(got, "|") == strings.Join(want, "|") {
			return true
		}
	}
	return false
}

// TestStoredSimulateMultiTurn: with --simulate a newcomer can hold a conversation offline,
// and continue it after a restart: the embedded platform's ids never repeat across runs, so
// a new answer never collides with one kept before.
func TestStoredSimulateMultiTurn(t *testing.T) {
	cfg := "ratelimit:\n  data_path: " + t.TempDir() + "\n"
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Args: []string{"--simulate"}})
	client := sdkClient(g, "any-key")
	params := storedParams("first", "")
	params.Model = "sim-chat"
	r1, err := client.Responses.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	params = storedParams("second", r1.ID)
	params.Model = "sim-chat"
	r2, err := client.Responses.New(ctx(t), params)
	if err != nil || r2.OutputText() != simAnswer("sim-chat", "second") {
		t.Fatalf("second turn: %v", err)
	}
	g.Signal(t, syscall.SIGTERM)
	if code := g.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("modelgate exited with %d", code)
	}

	g = startGateway(t, gatewayOptions{ConfigYAML: cfg, Args: []string{"--simulate"}})
	client = sdkClient(g, "any-key")
	params = storedParams("third", r2.ID)
	params.Model = "sim-chat"
	r3, err := client.Responses.New(ctx(t), params)
	if err != nil {
		t.Fatalf("third turn after the restart: %v", err)
	}
	if r3.ID == r1.ID || r3.ID == r2.ID {
		t.Fatalf("the restarted platform repeated an id: %s", r3.ID)
	}
	got, err := client.Responses.Get(ctx(t), r3.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != simAnswer("sim-chat", "third") || got.PreviousResponseID != r2.ID {
		t.Fatalf("third turn kept: %v %+v", err, got)
	}
	page, err := client.Responses.InputItems.List(ctx(t), r1.ID, responses.InputItemListParams{})
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("first turn's input items after the restart: %v", err)
	}
}

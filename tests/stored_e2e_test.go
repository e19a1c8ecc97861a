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

	"modelgate/platformsim"
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

// Background responses through modelgate with the official Go client: submitted, polled,
// cancelled, kept from other teams, and ended honestly when modelgate stops mid-job.

func backgroundParams(model, prompt string) responses.ResponseNewParams {
	p := storedParams(prompt, "")
	p.Model = model
	p.Background = openai.Bool(true)
	return p
}

// pollResponse polls id until its status is not queued or in_progress, or is want.
func pollResponse(t *testing.T, client openai.Client, id string, want ...responses.ResponseStatus) *responses.Response {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := client.Responses.Get(ctx(t), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("poll %s: %v", id, err)
		}
		for _, w := range want {
			if r.Status == w {
				return r
			}
		}
		if len(want) == 0 && r.Status != "queued" && r.Status != "in_progress" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %s", id, r.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// teamDayTokens reads a team's tokens of the day from /admin/usage.
func teamDayTokens(t *testing.T, g *gateway, team string) (in, out int64) {
	t.Helper()
	status, body := opsMust(t, "GET", g.URL+"/admin/usage", adminKey, "")
	if status != 200 {
		t.Fatalf("/admin/usage: %d %s", status, body)
	}
	u := gjson.Get(body, `teams.#(name=="`+team+`").usage`)
	return u.Get("day_input_tokens").Int(), u.Get("day_output_tokens").Int()
}

func TestBackgroundResponsesGoClient(t *testing.T) {
	p, g := startKeysGateway(t, "")
	alpha, beta := sdkClient(g, alphaKey), sdkClient(g, betaKey)

	// Submit: answered at once, queued, with modelgate's id.
	q, err := alpha.Responses.New(ctx(t), backgroundParams("gpt-4o-mini", "in the background"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Status != "queued" || !q.Background || !strings.HasPrefix(q.ID, "resp_") {
		t.Fatalf("submitted: status %s background %v id %s", q.Status, q.Background, q.ID)
	}
	done := pollResponse(t, alpha, q.ID)
	if done.Status != "completed" || done.ID != q.ID || done.OutputText() != simAnswer("sim-chat", "in the background") {
		t.Fatalf("polled: status %s id %s text %q", done.Status, done.ID, done.OutputText())
	}
	// Budgets settled with the platform's usage, exactly once.
	if in, out := teamDayTokens(t, g, "alpha"); in != done.Usage.InputTokens || out != done.Usage.OutputTokens || out == 0 {
		t.Errorf("alpha's tokens today %d/%d, the response used %d/%d", in, out, done.Usage.InputTokens, done.Usage.OutputTokens)
	}

	// The job's end reaches the metrics like a request of its own, tokens included.
	fams := scrape(t, g)
	if got := counterSum(fams, "modelgate_requests_total", map[string]string{"route": "/v1/responses (background)", "status": "200"}); got != 1 {
		t.Errorf("background jobs in modelgate_requests_total: %v", got)
	}
	if got := counterSum(fams, "modelgate_tokens_total", map[string]string{"team": "alpha", "direction": "output"}); got != float64(done.Usage.OutputTokens) {
		t.Errorf("alpha's output tokens in metrics: %v, want %d", got, done.Usage.OutputTokens)
	}

	// Cancel a slow one: the platform call ends and the response says cancelled.
	p.Sim.Enqueue("/v1/responses", platformsim.Reply{AfterEvents: 2, Silence: time.Hour})
	slow, err := alpha.Responses.New(ctx(t), backgroundParams("sim-slow", "think for a long time"))
	if err != nil {
		t.Fatal(err)
	}
	pollResponse(t, alpha, slow.ID, "in_progress")
	before := len(p.Sim.Cancellations())

	// Another team can neither see nor cancel it.
	if _, err := beta.Responses.Get(ctx(t), slow.ID, responses.ResponseGetParams{}); !notFound(err) {
		t.Errorf("another team's poll: %v", err)
	}
	if _, err := beta.Responses.Cancel(ctx(t), slow.ID); !notFound(err) {
		t.Errorf("another team's cancel: %v", err)
	}

	cancelled, err := alpha.Responses.Cancel(ctx(t), slow.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != "cancelled" || cancelled.ID != slow.ID {
		t.Errorf("cancel answered status %s id %s", cancelled.Status, cancelled.ID)
	}
	if got := pollResponse(t, alpha, slow.ID); got.Status != "cancelled" {
		t.Errorf("after cancel: %s", got.Status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(p.Sim.Cancellations()) == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(p.Sim.Cancellations()) == before {
		t.Error("the platform call was not ended by the cancel")
	}
	// Cancelling again answers the same object.
	if again, err := alpha.Responses.Cancel(ctx(t), slow.ID); err != nil || again.Status != "cancelled" {
		t.Errorf("second cancel: %v %v", again, err)
	}

	// background with store: false is refused, as OpenAI refuses it.
	params := backgroundParams("gpt-4o-mini", "x")
	params.Store = openai.Bool(false)
	var apiErr *openai.Error
	if _, err := alpha.Responses.New(ctx(t), params); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "store" {
		t.Errorf("background with store false: %v", err)
	}
	g.assertNoSecret(t, p.Key)
}

// TestBackgroundResponseCutByRestart: a job running when modelgate dies (SIGKILL), or is
// stopped past its drain timeout (SIGTERM), ends failed with a clear error, never stuck
// in_progress, once modelgate is back.
func TestBackgroundResponseCutByRestart(t *testing.T) {
	p := startPlatform(t)
	cfg := strings.Replace(keysConfig(p, "server:\n  drain_timeout: 300ms\n"), "data_path: data", "data_path: "+t.TempDir(), 1)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		want string
	}{
		{"killed", syscall.SIGKILL, "restarted"},
		{"stopped", syscall.SIGTERM, "shut down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
			client := sdkClient(g, alphaKey)
			p.Sim.Enqueue("/v1/responses", platformsim.Reply{AfterEvents: 2, Silence: time.Hour})
			q, err := client.Responses.New(ctx(t), backgroundParams("sim-slow", "a long job"))
			if err != nil {
				t.Fatal(err)
			}
			pollResponse(t, client, q.ID, "in_progress")
			g.Signal(t, tc.sig)
			g.Wait(t, 30*time.Second)

			g = startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
			client = sdkClient(g, alpha2Key)
			got, err := client.Responses.Get(ctx(t), q.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != "failed" || got.Error.Code != "server_error" || !strings.Contains(got.Error.Message, tc.want) {
				t.Errorf("after the restart: status %s error %+v", got.Status, got.Error)
			}
			g.Signal(t, syscall.SIGTERM)
			g.Wait(t, 30*time.Second)
		})
	}
}

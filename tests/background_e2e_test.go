package tests

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"modelgate/platformsim"
)

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

package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/billing"
	"modelgate/store"
	"modelgate/testclock"
)

// resolveYAML is issue 40's attack: `expensive` is priced and sends its calls to the
// platform's sim-chat. Team alpha names no allow-list and no budget, gamma has a spend
// budget no call of `expensive` fits, beta may use `cheap` only. sim-tools is no entry's.
func resolveYAML() string {
	return apitest.SimUpstreamYAML + `models:
  - id: expensive
    upstream: sim-chat
    price: {input: 1000, output: 1000}
  - id: cheap
    upstream: sim-long
teams:
` + teamYAML("alpha") + teamYAML("gamma", "limits: {spend_per_day: 0.000001}") + teamYAML("beta", "models: [cheap]") +
		"admin_keys: [mg-admin-key]\n"
}

// modelRoute is one model route and a request naming a model on it.
type modelRoute struct {
	name, path string
	body       func(model string) []byte
	anthropic  bool
}

func modelRoutes() []modelRoute {
	return []modelRoute{
		{"chat", "/v1/chat/completions", func(m string) []byte {
			return []byte(`{"model":"` + m + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
		}, false},
		{"responses", "/v1/responses", func(m string) []byte {
			return []byte(`{"model":"` + m + `","max_output_tokens":16,"input":"hi"}`)
		}, false},
		{"messages", "/v1/messages", func(m string) []byte {
			return []byte(`{"model":"` + m + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
		}, true},
	}
}

// A call naming the platform model a priced entry sends to is that entry: charged at its
// price under its id (spend and usage history), refused by its spend budget as the alias is,
// and refused to a team whose allow-list lacks the entry.
func TestPlatformNameIsItsEntry(t *testing.T) {
	ledger := memoryLedger(t)
	history := billing.NewRecorder(nil, time.Hour, testclock.Running(), nil)
	env := startEnv(t, envOptions{yaml: resolveYAML(), ledger: ledger, history: history})
	for _, r := range modelRoutes() {
		t.Run(r.name, func(t *testing.T) {
			before := env.upstreamCalls()
			spentBefore, _ := ledger.Spent("team:alpha")
			status, hdr, b := env.do(t, "POST", r.path, keyAlpha1, r.body("sim-chat"))
			if status != 200 {
				t.Fatalf("alpha naming sim-chat: %d %s", status, b)
			}
			if got := env.upstreamCalls() - before; got != 1 {
				t.Fatalf("%d platform calls", got)
			}
			if up := gjson.GetBytes(env.sim.Requests()[before].Body, "model").Str; up != "sim-chat" {
				t.Errorf("the platform was asked for %q", up)
			}
			if r.anthropic || r.path == "/v1/chat/completions" {
				// The answer names the model as the client did.
				if m := gjson.GetBytes(b, "model").Str; m != "sim-chat" {
					t.Errorf("the answer names %q", m)
				}
			}
			// The platform bills under modelgate's own request id, the one the answer names.
			billed := env.sim.BilledFor(hdr.Get("X-Request-Id"))
			want := billing.MicrosOf(float64(billed.InputTokens+billed.OutputTokens) * 1000 / 1e6)
			var spent float64
			if !waitFor(5*time.Second, func() bool { spent, _ = ledger.Spent("team:alpha"); return spent > spentBefore }) {
				t.Fatal("alpha was charged nothing for a call of a priced model by its platform name")
			}
			if got := billing.MicrosOf(spent - spentBefore); got != want || want == 0 {
				t.Errorf("charged %d micros, want %d (expensive's price)", got, want)
			}

			// gamma's budget covers no call of `expensive`, under either name.
			for _, name := range []string{"expensive", "sim-chat"} {
				calls := env.upstreamCalls()
				status, _, b := env.do(t, "POST", r.path, keyGamma, r.body(name))
				if status != http.StatusTooManyRequests || !strings.Contains(string(b), "spend") && !strings.Contains(string(b), "budget") {
					t.Errorf("gamma naming %s: %d %s, want its spend budget's 429", name, status, b)
				}
				if env.upstreamCalls() != calls {
					t.Errorf("gamma naming %s reached the platform", name)
				}
			}

			// beta may use `cheap` only: `expensive` is refused under its platform name too.
			calls := env.upstreamCalls()
			status, _, b = env.do(t, "POST", r.path, keyBeta, r.body("sim-chat"))
			if status != http.StatusNotFound || !strings.Contains(string(b), "'sim-chat'") {
				t.Errorf("beta naming sim-chat: %d %s", status, b)
			}
			if status, _, b := env.do(t, "POST", r.path, keyBeta, r.body("sim-long")); status != 200 {
				t.Errorf("beta naming sim-long (cheap's platform model): %d %s", status, b)
			}
			if env.upstreamCalls() != calls+1 {
				t.Errorf("%d platform calls, want only beta's call of cheap", env.upstreamCalls()-calls)
			}
		})
	}
	if err := history.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := history.Query(context.Background(), "00000101", "99991231", map[string]bool{"team": true, "model": true})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.Team == "alpha" && (row.Model != "expensive" || row.CostMicros == 0 || row.Requests != 3) {
			t.Errorf("alpha's usage history: %+v, want its 3 calls as expensive, priced", row)
		}
		if row.Model == "sim-chat" {
			t.Errorf("a usage row under the platform's name: %+v", row)
		}
	}

	// count_tokens resolves the name as a call does.
	for key, want := range map[string]int{keyAlpha1: 200, keyBeta: 404} {
		status, _, b := env.do(t, "POST", "/v1/messages/count_tokens", key, messagesBody("sim-chat"), "anthropic-version", "2023-06-01")
		if status != want {
			t.Errorf("count_tokens naming sim-chat: %d %s, want %d", status, b, want)
		}
	}
}

// A model no entry names is refused by default when teams are configured, on every model
// route, in the route's shape, with nothing sent to the platform; with
// limits.unlisted_models: allow it is forwarded.
func TestUnlistedModelRefused(t *testing.T) {
	env := startEnv(t, envOptions{yaml: resolveYAML(), store: tempBolt(t, store.BoltOptions{})})
	for _, r := range modelRoutes() {
		status, _, b := env.do(t, "POST", r.path, keyAlpha1, r.body("sim-tools"))
		if status != http.StatusNotFound {
			t.Errorf("%s: %d %s", r.name, status, b)
			continue
		}
		if r.anthropic {
			assertAnthropicError(t, b, "not_found_error")
		} else if e := assertOpenAIError(t, b); e.Error.Code == nil || *e.Error.Code != "model_not_found" {
			t.Errorf("%s: %s", r.name, b)
		}
	}
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-tools","input":"hi","background":true}`))
	if status != http.StatusNotFound {
		t.Errorf("background: %d %s", status, b)
	}
	status, _, b = env.do(t, "POST", "/v1/messages/count_tokens", keyAlpha1, messagesBody("sim-tools"), "anthropic-version", "2023-06-01")
	if status != http.StatusNotFound {
		t.Errorf("count_tokens: %d %s", status, b)
	}
	ws := dialSocket(t, env, keyAlpha1)
	ev := turnEvents(t, ws, `{"type":"response.create","model":"sim-tools","input":"hi"}`)
	if e := gjson.Parse(ev[0]); len(ev) != 1 || e.Get("status").Int() != http.StatusNotFound {
		t.Errorf("a WebSocket turn: %q", ev)
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Errorf("%d calls of an unlisted model reached the platform", n)
	}

	allowed := startEnv(t, envOptions{yaml: strings.Replace(resolveYAML(), "teams:", "limits: {unlisted_models: allow}\nteams:", 1)})
	for _, r := range modelRoutes() {
		if status, _, b := allowed.do(t, "POST", r.path, keyAlpha1, r.body("sim-tools")); status != 200 {
			t.Errorf("%s with unlisted models allowed: %d %s", r.name, status, b)
		}
	}
}

package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
)

// TestCompactionIsAccounted: through the real binary, a POST /v1/responses/compact is a call
// like any other: one platform call, its tokens in the team's and the key's figures of
// /admin/usage, a row of the usage history with its model, tag and cost at the model's
// prices, and an access log line under its route. POST /v1/responses/input_tokens beside it
// sends nothing and is charged nothing.
func TestCompactionIsAccounted(t *testing.T) {
	p := startPlatform(t)
	cfg := gatewayYAML{
		models: "  - id: gpt-4o-mini\n    upstream: sim-chat\n    price: {input: 2, output: 8}\n",
		teams:  alphaTeam(""),
		more:   "usage:\n  tag_keys: [feature]\n" + adminKeys,
	}.render(p)
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})

	input := `[{"role":"user","content":"first"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"one"}]},{"role":"user","content":"second"}]`
	code, _, b := apitest.Do(t, http.MethodPost, g.URL+"/v1/responses/input_tokens", alphaKey,
		strings.NewReader(`{"model":"gpt-4o-mini","input":`+input+`}`))
	if code != 200 || gjson.GetBytes(b, "input_tokens").Int() <= 0 {
		t.Fatalf("input_tokens: %d %s", code, b)
	}
	code, _, b = apitest.Do(t, http.MethodPost, g.URL+"/v1/responses/compact", alphaKey,
		strings.NewReader(`{"model":"gpt-4o-mini","input":`+input+`}`), "X-Modelgate-Tags", "feature=compaction")
	if code != 200 {
		t.Fatalf("compact: %d %s", code, b)
	}
	usage := gjson.GetBytes(b, "usage")
	in, out := usage.Get("input_tokens").Int(), usage.Get("output_tokens").Int()
	if in <= 0 || out <= 0 {
		t.Fatalf("compaction usage: %s", b)
	}
	if n := len(upstreamCalls(p, 0)); n != 1 {
		t.Fatalf("%d platform calls, want the compaction's one", n)
	}

	// /admin/usage: the team and the key counted one request and its tokens.
	code, body := opsMust(t, "GET", g.URL+"/admin/usage", adminKey, "")
	team := gjson.Get(body, `teams.#(name=="alpha")`)
	if code != 200 {
		t.Fatalf("/admin/usage: %d %s", code, body)
	}
	for _, u := range []gjson.Result{team.Get("usage"), team.Get("keys.0.usage")} {
		if u.Get("day_requests").Int() != 1 || u.Get("day_input_tokens").Int() != in || u.Get("day_output_tokens").Int() != out {
			t.Errorf("/admin/usage: %s, want 1 request of %d/%d tokens", u.Raw, in, out)
		}
	}

	// The usage history: its row, by model and by tag, priced.
	wantCost := float64(in*2+out*8) / 1e6
	var row gjson.Result
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body = opsMust(t, "GET", g.URL+"/admin/usage/history?group_by=model,tag:feature", adminKey, "")
		row = gjson.Get(body, `rows.#(tag_value=="compaction")`)
		if code == 200 && row.Exists() || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polled: the history may be written behind the answer
	}
	if row.Get("model").Str != "gpt-4o-mini" || row.Get("requests").Int() != 1 || row.Get("input_tokens").Int() != in ||
		row.Get("output_tokens").Int() != out || diffCost(row.Get("cost").Float(), wantCost) {
		t.Errorf("history: %d %s, want a row of 1 request, %d/%d tokens, cost %g", code, body, in, out, wantCost)
	}

	// The access log names the route.
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(g.Output.String(), "route=/v1/responses/compact") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(g.Output.String(), "route=/v1/responses/compact") {
		t.Errorf("no access log line for the compaction:\n%s", g.Output.String())
	}
	g.assertNoSecret(t, p.Key)
}

// diffCost reports whether two costs differ by more than rounding.
func diffCost(a, b float64) bool {
	d := a - b
	return d > 1e-9 || d < -1e-9
}

package tests

import (
	"net/http"
	"strings"
	"testing"

	"modelgate/apitest"
)

// stallFallbackYAML: thinker stalls before its first token (sim-stall) and falls back to
// quick; thinker's output is dear, so its abandoned attempt, charged at its reservation
// (no_answer), costs about 0.64 of the end user's daily 1.0 and quick's answer next to
// nothing. One call fits the end user's budget; the abandoned attempt's cost leaves no room
// for a second.
const stallFallbackYAML = `  - id: thinker
    upstream: sim-stall
    first_token_timeout: 500ms
    fallbacks: [quick]
    price: {input: 1, output: 10000}
  - id: quick
    upstream: sim-chat
    price: {input: 0.01, output: 0.01}
`

// Through the real binary (issue 42): a streamed chat call that names an end user and a tag
// and whose first model stalls falls back, and its abandoned attempt is billed like the
// request it belongs to: under the request's end user and tag in the usage history's split,
// and against end_user_limits.spend_per_day, so the same end user's next call is refused.
func TestAbandonedAttemptBilledToEndUser(t *testing.T) {
	p := startPlatform(t)
	cfg := gatewayYAML{
		models: stallFallbackYAML,
		teams: `  - name: alpha
    end_user_limits: { spend_per_day: 1.0 }
    keys:
      - name: alpha-1
        key: ${ALPHA_KEY}
`,
		more: adminKeys + "usage:\n  tag_keys: [feature]\n",
	}.render(p)
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	body := `{"model":"thinker","stream":true,"user":"u-stall","max_tokens":64,` +
		`"messages":[{"role":"user","content":"hello"}]}`
	call := func() (int, http.Header, string) {
		code, h, b := apitest.Do(t, http.MethodPost, g.URL+"/v1/chat/completions", alphaKey,
			strings.NewReader(body), "X-Modelgate-Tags", "feature=deep")
		return code, h, string(b)
	}
	code, h, b := call()
	if code != 200 || h.Get("X-Modelgate-Served-Model") != "quick" || !strings.Contains(b, "[DONE]") {
		t.Fatalf("first call: %d served by %q\n%s", code, h.Get("X-Modelgate-Served-Model"), b)
	}

	// Every cost of the day sits under the end user and the tag: none under (none).
	split := func(groupBy string) map[string]float64 {
		t.Helper()
		out := map[string]float64{}
		for _, r := range usageHistory(t, g.URL, groupBy) {
			out[r.TagValue+r.User] += r.Cost
		}
		return out
	}
	for _, c := range []struct{ groupBy, want string }{{"user", "u-stall"}, {"tag:feature", "deep"}} {
		got := split(c.groupBy)
		if len(got) != 1 || got[c.want] < 0.5 {
			t.Errorf("group_by=%s: %v, want all of the abandoned attempt's cost (> 0.5) under %q", c.groupBy, got, c.want)
		}
	}

	// The abandoned attempt's cost alone leaves the end user too little for a second call.
	code, _, b = call()
	if code != http.StatusTooManyRequests || !strings.Contains(b, "insufficient_quota") {
		t.Fatalf("second call: %d, want 429 insufficient_quota (the end user's daily spend)\n%s", code, b)
	}
}

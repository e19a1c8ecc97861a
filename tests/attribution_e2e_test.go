package tests

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"modelgate/apitest"
)

// Through the real binary, on every model route, streamed and not: the end user a body names
// and the tags of the header, the body's metadata and the key's defaults reach the usage
// history, and the admin API splits the day's spend by tag and by end user, in JSON and CSV,
// with the requests that named nothing under (none).
func TestAttributionReachesTheHistory(t *testing.T) {
	p, g := startKeysGateway(t, "usage:\n  tag_keys: [feature]\n")
	send := func(path, body, tags string) {
		t.Helper()
		hdr := []string{"anthropic-version", "2023-06-01"}
		if tags != "" {
			hdr = append(hdr, "X-Modelgate-Tags", tags)
		}
		if code, _, b := apitest.Do(t, http.MethodPost, g.URL+path, alphaKey, strings.NewReader(body), hdr...); code != 200 {
			t.Fatalf("%s: %d %s", path, code, b)
		}
	}
	msgs := `"messages":[{"role":"user","content":"hello"}]`
	send("/v1/chat/completions", `{"model":"sim-chat","user":"u-1","metadata":{"feature":"search"},`+msgs+`}`, "")
	send("/v1/chat/completions", `{"model":"sim-chat","stream":true,"user":"u-2",`+msgs+`}`, "feature=chat-stream")
	send("/v1/messages", `{"model":"sim-chat","max_tokens":32,"metadata":{"user_id":"u-1"},`+msgs+`}`, "feature=search")
	send("/v1/messages", `{"model":"sim-chat","max_tokens":32,"stream":true,`+msgs+`}`, "")
	send("/v1/responses", `{"model":"sim-chat","input":"hello","user":"u-3","metadata":{"feature":"summarize"}}`, "")
	send("/v1/responses", `{"model":"sim-chat","input":"hello","stream":true,"user":"u-3"}`, "feature=summarize")
	_ = p

	split := func(groupBy string) map[string]int64 {
		t.Helper()
		return splitHistory(t, g.URL, groupBy, func(r historyRow) int64 { return r.Requests })
	}
	want := map[string]int64{"search": 2, "chat-stream": 1, "summarize": 2, "(none)": 1}
	if got := split("tag:feature"); !maps.Equal(got, want) {
		t.Errorf("by feature %v, want %v", got, want)
	}
	want = map[string]int64{"u-1": 2, "u-2": 1, "u-3": 2, "(none)": 1}
	if got := split("user"); !maps.Equal(got, want) {
		t.Errorf("by end user %v, want %v", got, want)
	}
	code, _, b := apitest.Do(t, http.MethodGet, g.URL+"/admin/usage/history?group_by=team,tag:feature", adminKey, nil, "Accept", "text/csv")
	csv := string(b)
	if code != 200 || !strings.Contains(csv, "tag:feature") || !strings.Contains(csv, "alpha,search,2") && !strings.Contains(csv, ",search,") {
		t.Errorf("CSV: %d\n%s", code, csv)
	}
}

// historyRow is a row of /admin/usage/history as the attribution tests read it.
type historyRow struct {
	TagValue string  `json:"tag_value"`
	User     string  `json:"user"`
	Requests int64   `json:"requests"`
	Cost     float64 `json:"cost"`
}

// usageHistory reads the gateway's usage history grouped by groupBy, with the admin key.
func usageHistory(t testing.TB, gateway, groupBy string) []historyRow {
	t.Helper()
	code, body := opsMust(t, "GET", gateway+"/admin/usage/history?group_by="+groupBy, adminKey, "")
	var hist struct {
		Rows []historyRow `json:"rows"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &hist) != nil {
		t.Fatalf("group_by=%s: %d %s", groupBy, code, body)
	}
	return hist.Rows
}

// splitHistory sums one figure of the usage history grouped by groupBy (a tag or the end
// user, so each row names its group in one of TagValue and User).
func splitHistory[V int64 | float64](t testing.TB, gateway, groupBy string, figure func(historyRow) V) map[string]V {
	t.Helper()
	out := map[string]V{}
	for _, r := range usageHistory(t, gateway, groupBy) {
		out[r.TagValue+r.User] += figure(r)
	}
	return out
}

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

// startStallFallback starts the gateway of the stalling-model tests: the stallFallbackYAML
// models, team alpha's end users at 1.0 a day each, and the feature tag recorded.
func startStallFallback(t *testing.T, p *platform) *gateway {
	t.Helper()
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
	return startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
}

// Through the real binary (issue 42): a streamed chat call that names an end user and a tag
// and whose first model stalls falls back, and its abandoned attempt is billed like the
// request it belongs to: under the request's end user and tag in the usage history's split,
// and against end_user_limits.spend_per_day, so the same end user's next call is refused.
func TestAbandonedAttemptBilledToEndUser(t *testing.T) {
	p := startPlatform(t)
	g := startStallFallback(t, p)
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
	for _, c := range []struct{ groupBy, want string }{{"user", "u-stall"}, {"tag:feature", "deep"}} {
		got := splitHistory(t, g.URL, c.groupBy, func(r historyRow) float64 { return r.Cost })
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

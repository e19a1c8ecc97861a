package tests

import (
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
		out := map[string]int64{}
		for _, r := range usageHistory(t, g.URL, groupBy) {
			out[r.TagValue+r.User] += r.Requests
		}
		return out
	}
	want := map[string]int64{"search": 2, "chat-stream": 1, "summarize": 2, "(none)": 1}
	if got := split("tag:feature"); !equalCounts(got, want) {
		t.Errorf("by feature %v, want %v", got, want)
	}
	want = map[string]int64{"u-1": 2, "u-2": 1, "u-3": 2, "(none)": 1}
	if got := split("user"); !equalCounts(got, want) {
		t.Errorf("by end user %v, want %v", got, want)
	}
	code, _, b := apitest.Do(t, http.MethodGet, g.URL+"/admin/usage/history?group_by=team,tag:feature", adminKey, nil, "Accept", "text/csv")
	csv := string(b)
	if code != 200 || !strings.Contains(csv, "tag:feature") || !strings.Contains(csv, "alpha,search,2") && !strings.Contains(csv, ",search,") {
		t.Errorf("CSV: %d\n%s", code, csv)
	}
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

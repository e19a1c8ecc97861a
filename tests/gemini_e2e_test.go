package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
)

// geminiCall sends a Gemini API call to the binary with the key as x-goog-api-key.
func geminiCall(t *testing.T, g *gateway, method, path, key, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	code, h, b := apitest.Do(t, method, g.URL+path, "", strings.NewReader(body), append([]string{"X-Goog-Api-Key", key}, hdr...)...)
	return code, h, string(b)
}

// Through the real binary (issue 43): each Gemini action and framing, the models list as a
// Gemini client reads it, a key sent as ?key= kept out of the process's output, and Google's
// error shape for a bad body; the platform gets Responses calls only for the generations.
func TestGeminiRoutesEndToEnd(t *testing.T) {
	p, g := startKeysGateway(t, "")
	const contents = `{"contents":[{"role":"user","parts":[{"text":"hello gemini"}]}]}`
	mark := len(p.Sim.Requests())

	code, _, b := geminiCall(t, g, "POST", "/v1beta/models/sim-chat:generateContent", alphaKey, contents)
	if code != 200 || gjson.Get(b, "candidates.0.finishReason").Str != "STOP" || gjson.Get(b, "candidates.0.content.parts.0.text").Str == "" {
		t.Fatalf("generateContent: %d %s", code, b)
	}
	code, h, sse := apitest.Do(t, "POST", g.URL+"/v1beta/models/sim-chat:streamGenerateContent?alt=sse&key="+alphaKey, "", strings.NewReader(contents))
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") || !strings.HasPrefix(string(sse), "data: {") || !strings.Contains(string(sse), `"finishReason":"STOP"`) {
		t.Fatalf("streamGenerateContent?alt=sse with ?key=: %d %s\n%s", code, h.Get("Content-Type"), sse)
	}
	code, h, s := geminiCall(t, g, "POST", "/v1/models/sim-chat:streamGenerateContent", alphaKey, contents)
	var chunks []json.RawMessage
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(s), &chunks) != nil || len(chunks) < 2 {
		t.Fatalf("streamGenerateContent as a JSON array under /v1: %d %s\n%s", code, h.Get("Content-Type"), s)
	}
	if calls := len(p.Sim.Requests()) - mark; calls != 3 {
		t.Fatalf("%d platform calls for three generations", calls)
	}

	code, _, s = geminiCall(t, g, "POST", "/v1beta/models/sim-chat:countTokens", alphaKey, contents)
	if code != 200 || gjson.Get(s, "totalTokens").Int() <= 0 {
		t.Fatalf("countTokens: %d %s", code, s)
	}
	code, _, s = geminiCall(t, g, "GET", "/v1/models", betaKey, "", "X-Goog-Api-Client", "google-genai-sdk/1.30.0 gl-node/v22")
	if code != 200 || gjson.Get(s, "models.#").Int() != 1 || gjson.Get(s, "models.0.name").Str != "models/sim-chat" {
		t.Fatalf("GET /v1/models for a Gemini client: %d %s", code, s)
	}
	code, _, s = geminiCall(t, g, "POST", "/v1beta/models/sim-chat:generateContent", alphaKey, `{"contents":[{"parts":[{"text":"x"}]}],"Contents":[]}`)
	if code != 400 || gjson.Get(s, "error.status").Str != "INVALID_ARGUMENT" || gjson.Get(s, "error.code").Int() != 400 {
		t.Fatalf("a case-variant key: %d %s", code, s)
	}
	code, _, s = geminiCall(t, g, "POST", "/v1beta/models/sim-chat:generateContent", "mg-e2e-nope", contents)
	if code != 401 || gjson.Get(s, "error.status").Str != "UNAUTHENTICATED" {
		t.Fatalf("an unknown key: %d %s", code, s)
	}
	if calls := len(p.Sim.Requests()) - mark; calls != 3 {
		t.Fatalf("%d platform calls: a count, a list or a refusal reached the platform", calls)
	}
	out := g.Output.String()
	if !strings.Contains(out, "route=/v1beta/models/{model}:streamGenerateContent") {
		t.Fatalf("no access line for the stream:\n%s", tailOf(out))
	}
	g.assertNoSecret(t, alphaKey)
	g.assertNoSecret(t, p.Key)
}

// Through the real binary: a streamed Gemini call whose first model stalls before its first
// token falls back, served by the fallback (x-modelgate-served-model), and the request and
// its abandoned attempt are billed under the end user its labels name and the tag its header
// names; the end user's spent daily budget then refuses the next call with Google's 429.
func TestGeminiStreamFallbackAttributed(t *testing.T) {
	p := startPlatform(t)
	g := startStallFallback(t, p)
	body := `{"labels":{"user":"u-gem"},"generationConfig":{"maxOutputTokens":64},"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`
	call := func() (int, http.Header, string) {
		return geminiCall(t, g, "POST", "/v1beta/models/thinker:streamGenerateContent?alt=sse", alphaKey, body, "X-Modelgate-Tags", "feature=deep")
	}
	code, h, b := call()
	if code != 200 || h.Get("X-Modelgate-Served-Model") != "quick" || !strings.Contains(b, `"finishReason":"STOP"`) {
		t.Fatalf("first call: %d served by %q\n%s", code, h.Get("X-Modelgate-Served-Model"), b)
	}
	if !strings.Contains(b, `"modelVersion":"thinker"`) {
		t.Errorf("the answer does not name the model asked for:\n%s", b)
	}
	for _, c := range []struct{ groupBy, want string }{{"user", "u-gem"}, {"tag:feature", "deep"}} {
		got := map[string]float64{}
		for _, r := range usageHistory(t, g.URL, c.groupBy) {
			got[r.TagValue+r.User] += r.Cost
		}
		if len(got) != 1 || got[c.want] < 0.5 {
			t.Errorf("group_by=%s: %v, want all of the abandoned attempt's cost (> 0.5) under %q", c.groupBy, got, c.want)
		}
	}
	if out := g.Output.String(); !strings.Contains(out, "end_user=u-gem") || !strings.Contains(out, "tags=feature:deep") {
		t.Errorf("the access line misses the attribution:\n%s", tailOf(out))
	}
	code, h, b = call()
	if code != http.StatusTooManyRequests || gjson.Get(b, "error.status").Str != "RESOURCE_EXHAUSTED" || h.Get("Retry-After") == "" && h.Get("X-Should-Retry") != "false" {
		t.Fatalf("second call: %d, want Google's 429 (the end user's daily spend)\n%s", code, b)
	}
}

package proxy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/tokens"
	"modelgate/translate"
)

// geminiBody is a one-turn generateContent body.
func geminiBody(text string) []byte {
	return []byte(`{"contents":[{"role":"user","parts":[{"text":"` + text + `"}]}]}`)
}

// assertGeminiError checks Google's error shape: code, a message, the canonical status.
func assertGeminiError(t *testing.T, b []byte, code int, status string) {
	t.Helper()
	e := gjson.ParseBytes(b)
	if e.Get("error.code").Int() != int64(code) || e.Get("error.status").Str != status || e.Get("error.message").Str == "" || len(e.Get("error").Map()) != 3 {
		t.Errorf("body %s, want Google's error %d %s", b, code, status)
	}
}

// geminiText joins the text parts of candidate 0 of one GenerateContentResponse.
func geminiText(t *testing.T, b []byte) string {
	t.Helper()
	var r struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("not a GenerateContentResponse: %v: %s", err, b)
	}
	var s strings.Builder
	for _, c := range r.Candidates {
		for _, p := range c.Content.Parts {
			s.WriteString(p.Text)
		}
	}
	return s.String()
}

// safetySettings and cachedContent are accepted and reach nothing: the platform moderates on
// its own and caches prompts by itself.
func TestGeminiIgnoredFields(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, _, b := env.do(t, "POST", "/v1beta/models/sim-chat:generateContent", keyAlpha1, []byte(`{"contents":[{"parts":[{"text":"hi"}]}],`+
		`"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],"cachedContent":"cachedContents/abc123"}`))
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	reqs := env.sim.Requests()
	if up := string(reqs[len(reqs)-1].Body); strings.Contains(up, "HARM_CATEGORY") || strings.Contains(up, "abc123") {
		t.Errorf("an ignored field reached the platform: %s", up)
	}
}

func TestGeminiGenerateContent(t *testing.T) {
	env := newTestEnv(t, "", nil)
	for _, path := range []string{"/v1beta/models/sim-chat:generateContent", "/v1/models/sim-chat:generateContent", "/v1beta/tunedModels/sim-chat:generateContent"} {
		t.Run(path, func(t *testing.T) {
			before := env.upstreamCalls()
			status, h, b := env.do(t, "POST", path, "", geminiBody("hi"), "X-Goog-Api-Key", keyAlpha1)
			if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d %s: %s", status, h.Get("Content-Type"), b)
			}
			r := gjson.ParseBytes(b)
			if geminiText(t, b) == "" || r.Get("candidates.0.finishReason").Str != "STOP" || r.Get("modelVersion").Str != "sim-chat" ||
				r.Get("usageMetadata.promptTokenCount").Int() == 0 || r.Get("usageMetadata.totalTokenCount").Int() == 0 {
				t.Errorf("answer %s", b)
			}
			reqs := env.sim.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("%d platform calls, want 1", len(reqs)-before)
			}
			up := gjson.ParseBytes(reqs[len(reqs)-1].Body)
			if up.Get("model").Str != "sim-chat" || up.Get("stream").Bool() || up.Get("store").Type != gjson.False {
				t.Errorf("platform got %s", reqs[len(reqs)-1].Body)
			}
		})
	}
}

// streamGenerateContent with alt=sse is an SSE stream of GenerateContentResponse chunks;
// without it, one JSON array written as it goes, served as application/json. Both hold the
// same text as the non-stream answer, and their last chunk has the finish reason and usage.
func TestGeminiStreamFramings(t *testing.T) {
	env := newTestEnv(t, "", nil)
	_, _, whole := env.do(t, "POST", "/v1beta/models/sim-chat:generateContent", keyAlpha1, geminiBody("hi"))
	want := geminiText(t, whole)

	t.Run("sse", func(t *testing.T) {
		status, h, b := env.do(t, "POST", "/v1beta/models/sim-chat:streamGenerateContent?alt=sse", keyAlpha1, geminiBody("hi"))
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d %s: %s", status, h.Get("Content-Type"), b)
		}
		var text strings.Builder
		var last []byte
		events := strings.Split(strings.TrimSuffix(string(b), "\r\n\r\n"), "\r\n\r\n")
		for _, ev := range events {
			data, ok := strings.CutPrefix(ev, "data: ")
			if !ok || !json.Valid([]byte(data)) {
				t.Fatalf("event %q is not one data line of JSON", ev)
			}
			text.WriteString(geminiText(t, []byte(data)))
			last = []byte(data)
		}
		if len(events) < 2 || text.String() != want {
			t.Errorf("%d events with text %q, want %q", len(events), text.String(), want)
		}
		if r := gjson.ParseBytes(last); r.Get("candidates.0.finishReason").Str != "STOP" || !r.Get("usageMetadata.totalTokenCount").Exists() {
			t.Errorf("last chunk %s", last)
		}
	})
	t.Run("json_array", func(t *testing.T) {
		status, h, b := env.do(t, "POST", "/v1beta/models/sim-chat:streamGenerateContent", keyAlpha1, geminiBody("hi"))
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Fatalf("status %d %s: %s", status, h.Get("Content-Type"), b)
		}
		var chunks []json.RawMessage
		if err := json.Unmarshal(b, &chunks); err != nil || len(chunks) < 2 {
			t.Fatalf("not a JSON array of chunks (%v): %s", err, b)
		}
		var text strings.Builder
		for _, c := range chunks {
			text.WriteString(geminiText(t, c))
		}
		if text.String() != want {
			t.Errorf("text %q, want %q", text.String(), want)
		}
		if r := gjson.ParseBytes(chunks[len(chunks)-1]); r.Get("candidates.0.finishReason").Str != "STOP" {
			t.Errorf("last chunk %s", chunks[len(chunks)-1])
		}
	})
}

// countTokens is the calibrated input estimate, computed locally: the same figure for the
// same contents whether sent alone or as a whole generateContentRequest, more for more text,
// and nothing reaches the platform.
func TestGeminiCountTokens(t *testing.T) {
	env := newTestEnv(t, "", nil)
	before := env.upstreamCalls()
	count := func(body string) int64 {
		t.Helper()
		_, b := env.post(t, "/v1beta/models/sim-chat:countTokens", "", []byte(body), 200, "X-Goog-Api-Key", keyAlpha1)
		n := gjson.GetBytes(b, "totalTokens")
		if n.Type != gjson.Number || len(gjson.ParseBytes(b).Map()) != 1 {
			t.Fatalf("answer %s", b)
		}
		return n.Int()
	}
	short := count(string(geminiBody("hi")))
	whole := count(`{"generateContentRequest":` + string(geminiBody("hi")) + `}`)
	long := count(string(geminiBody(strings.Repeat("many words here ", 200))))
	req, err := translate.ParseGeminiCount(geminiBody("hi"), "sim-chat")
	if err != nil {
		t.Fatal(err)
	}
	want := env.server.calibration.Factor("alpha", "sim-chat").Count(tokens.EstimateResponsesInput(req.ToResponses("sim-chat", translate.RequestOptions{})))
	if short != want || whole != short || long <= short {
		t.Errorf("counts %d (want %d), whole request %d, long %d", short, want, whole, long)
	}
	if env.upstreamCalls() != before {
		t.Error("countTokens reached the platform")
	}
	status, _, b := env.do(t, "POST", "/v1beta/models/sim-chat:countTokens", keyAlpha1, []byte(`{"contents":[{"parts":[{"bogus":1}]}]}`))
	if status != 400 {
		t.Fatalf("bad body: %d %s", status, b)
	}
	assertGeminiError(t, b, 400, "INVALID_ARGUMENT")
	status, _, b = env.do(t, "POST", "/v1beta/models/sim-tools:countTokens", "", geminiBody("hi"), "X-Goog-Api-Key", keyBeta)
	if status != 404 {
		t.Fatalf("outside the allow-list: %d %s", status, b)
	}
	assertGeminiError(t, b, 404, "NOT_FOUND")
}

// The models routes list the caller's allow-list as Google's Model objects under both
// versions; GET /v1/models answers in Google's shape only to a Gemini client.
func TestGeminiModels(t *testing.T) {
	env := newTestEnv(t, "", nil)
	names := func(b []byte) []string {
		var out []string
		for _, m := range gjson.GetBytes(b, "models").Array() {
			out = append(out, m.Get("name").Str)
		}
		return out
	}
	for _, c := range []struct {
		name, path string
		hdr        []string
	}{
		{"v1beta", "/v1beta/models", []string{"X-Goog-Api-Key", keyBeta}},
		{"v1 by api key header", "/v1/models", []string{"X-Goog-Api-Key", keyBeta}},
		{"v1 by client header", "/v1/models", []string{"X-Goog-Api-Client", "google-genai-sdk/1.0 gl-node/22", "Authorization", "Bearer " + keyBeta}},
	} {
		status, _, b := env.do(t, "GET", c.path, "", nil, c.hdr...)
		if got := names(b); status != 200 || len(got) != 1 || got[0] != "models/sim-chat" ||
			gjson.GetBytes(b, "models.0.supportedGenerationMethods.#").Int() != 3 {
			t.Errorf("%s: %d %s", c.name, status, b)
		}
	}
	status, _, b := env.do(t, "GET", "/v1/models", keyBeta, nil)
	if status != 200 || gjson.GetBytes(b, "object").Str != "list" || gjson.GetBytes(b, "data.0.id").Str != "sim-chat" {
		t.Errorf("OpenAI's list: %d %s", status, b)
	}
	for _, path := range []string{"/v1beta/models/sim-chat", "/v1beta/models/models/sim-chat", "/v1beta/tunedModels/sim-chat", "/v1/models/sim-chat"} {
		status, _, b := env.do(t, "GET", path, "", nil, "X-Goog-Api-Key", keyBeta)
		if status != 200 || gjson.GetBytes(b, "name").Str != "models/sim-chat" || gjson.GetBytes(b, "baseModelId").Str != "sim-chat" {
			t.Errorf("%s: %d %s", path, status, b)
		}
	}
	status, _, b = env.do(t, "GET", "/v1/models/sim-chat", keyBeta, nil)
	if status != 200 || gjson.GetBytes(b, "object").Str != "model" {
		t.Errorf("OpenAI's model: %d %s", status, b)
	}
	for _, path := range []string{"/v1beta/models/sim-tools", "/v1/models/sim-tools", "/v1beta/models/nope"} {
		status, _, b := env.do(t, "GET", path, "", nil, "X-Goog-Api-Key", keyBeta)
		if status != 404 {
			t.Fatalf("%s: %d %s", path, status, b)
		}
		assertGeminiError(t, b, 404, "NOT_FOUND")
	}
}

// The key is read from x-goog-api-key, ?key= or a bearer token; a missing or unknown one is
// Google's 401 UNAUTHENTICATED, and nothing reaches the platform.
func TestGeminiAuth(t *testing.T) {
	env := newTestEnv(t, "", nil)
	path := "/v1beta/models/sim-chat:generateContent"
	for _, c := range []struct {
		name   string
		path   string
		bearer string
		hdr    []string
		status int
	}{
		{"x-goog-api-key", path, "", []string{"X-Goog-Api-Key", keyAlpha1}, 200},
		{"query key", path + "?key=" + keyAlpha1, "", nil, 200},
		{"bearer", path, keyAlpha1, nil, 200},
		{"header wins over bearer", path, "mg-nope", []string{"X-Goog-Api-Key", keyAlpha1}, 200},
		{"stream with query key", "/v1beta/models/sim-chat:streamGenerateContent?alt=sse&key=" + keyAlpha1, "", nil, 200},
		{"missing", path, "", nil, 401},
		{"unknown header key", path, "", []string{"X-Goog-Api-Key", "mg-nope"}, 401},
		{"unknown query key", path + "?key=mg-nope", "", nil, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := env.upstreamCalls()
			status, h, b := env.do(t, "POST", c.path, c.bearer, geminiBody("hi"), c.hdr...)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, b)
			}
			if c.status == 401 {
				assertGeminiError(t, b, 401, "UNAUTHENTICATED")
				if env.upstreamCalls() != before {
					t.Error("an unauthenticated call reached the platform")
				}
			} else if strings.HasSuffix(c.path, "alt=sse&key="+keyAlpha1) && !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
				t.Errorf("alt=sse lost with the key: %s", h.Get("Content-Type"))
			}
		})
	}
}

// A key sent in the query string appears in no log line, no trace and no error message,
// whatever route it was sent to.
func TestGeminiQueryKeyNotLogged(t *testing.T) {
	env := newTestEnv(t, "", nil)
	secret := keyAlpha1
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1beta/models/sim-chat:generateContent?key=" + secret},
		{"POST", "/v1beta/models/sim-chat:streamGenerateContent?alt=sse&key=" + secret},
		{"POST", "/v1beta/models/sim-chat:countTokens?key=" + secret},
		{"POST", "/v1beta/models/sim-chat:embedContent?key=" + secret},
		{"POST", "/v1beta/models/nope:generateContent?key=" + secret},
		{"GET", "/v1beta/models?key=" + secret},
		{"GET", "/v1beta/models/nope?key=" + secret},
		{"GET", "/v1beta/cachedContents?key=" + secret},
		{"POST", "/v1beta/models/sim-chat:generateContent?key=" + secret + "x"},
		{"POST", "/v1beta/models/sim-chat:generateContent?%6bey=" + secret}, // key, escaped
		{"POST", "/v1beta/models/sim-chat:generateContent?alt=%zz&key=" + secret},
	} {
		_, h, b := env.do(t, c.method, c.path, "", geminiBody("hi"))
		if strings.Contains(string(b), secret) {
			t.Errorf("%s %s: the key is in the answer: %s", c.method, c.path, b)
		}
		for name, vs := range h {
			if strings.Contains(strings.Join(vs, " "), secret) {
				t.Errorf("%s %s: the key is in header %s", c.method, c.path, name)
			}
		}
	}
	logs := env.logs.String()
	if !strings.Contains(logs, "/v1beta/models/{model}:streamGenerateContent") {
		t.Fatalf("the calls were not logged:\n%s", logs)
	}
	if strings.Contains(logs, secret) {
		t.Errorf("the query key is in the log:\n%s", logs)
	}
}

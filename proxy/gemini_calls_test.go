package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/platformsim"
)

// The Gemini routes record the end user its labels name ("user") and the allow-listed tags,
// the tags header's over the labels' over the key's defaults, streamed or not; a malformed
// tags header is Google's 400 and reaches nothing.
func TestGeminiAttribution(t *testing.T) {
	var sums summaries
	env := startEnv(t, envOptions{mutate: tagConfig, hooks: sums.hooks()})
	contents := `"contents":[{"parts":[{"text":"hi"}]}]`
	cases := []struct {
		name, body, header string
		key                string
		user, tags         string
	}{
		{"labels", `{` + contents + `,"labels":{"user":"g/1","customer":"acme","other":"dropped"}}`, "",
			keyAlpha1, "g%2F1", "customer:acme,feature:default-feature"},
		{"header wins", `{` + contents + `,"labels":{"feature":"labelled"}}`, "feature=h",
			keyAlpha1, "", "customer:default-customer,feature:h"},
		{"no defaults", `{` + contents + `}`, "", keyAlpha2, "", ""},
	}
	for _, tc := range cases {
		for _, action := range []string{"generateContent", "streamGenerateContent?alt=sse"} {
			name := tc.name + "/" + action
			t.Run(name, func(t *testing.T) {
				id := "req_gemini_attr_" + strconv.Itoa(len(name)) + strings.NewReplacer(" ", "_", "?", "_", "=", "_", "/", "_").Replace(name)
				hdr := []string{"X-Request-Id", id, "X-Goog-Api-Key", tc.key}
				if tc.header != "" {
					hdr = append(hdr, "X-Modelgate-Tags", tc.header)
				}
				status, _, b := env.do(t, http.MethodPost, "/v1beta/models/sim-chat:"+action, "", []byte(tc.body), hdr...)
				if status != 200 {
					t.Fatalf("%d %s", status, b)
				}
				got := sums.wait(t, id)
				if got.EndUser != tc.user || got.Tags != tc.tags || got.InputTokens == 0 {
					t.Fatalf("end user %q tags %q (input %d), want %q %q", got.EndUser, got.Tags, got.InputTokens, tc.user, tc.tags)
				}
			})
		}
	}
	before := env.upstreamCalls()
	status, _, b := env.do(t, http.MethodPost, "/v1beta/models/sim-chat:generateContent", "", []byte(`{`+contents+`}`),
		"X-Goog-Api-Key", keyAlpha1, "X-Modelgate-Tags", "a=1,a=2")
	if status != 400 {
		t.Fatalf("a malformed tags header: %d %s", status, b)
	}
	assertGeminiError(t, b, 400, "INVALID_ARGUMENT")
	if env.upstreamCalls() != before {
		t.Error("a refused call reached the platform")
	}
	for _, h := range env.sim.Requests() {
		if strings.Contains(string(h.Body), "labels") || strings.Contains(string(h.Body), "g/1") {
			t.Errorf("the labels reached the platform: %s", h.Body)
		}
	}
}

// A non-stream call with stop sequences is served from an upstream stream that is stopped at
// the sequence: the answer ends before it, with STOP.
func TestGeminiStopSequenceEndsUpstreamEarly(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, _, b := env.do(t, "POST", "/v1beta/models/sim-slow:generateContent", keyAlpha1,
		[]byte(`{"generationConfig":{"stopSequences":["from"],"maxOutputTokens":4000},"contents":[{"parts":[{"text":"a long request to be cut short"}]}]}`))
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	text := geminiText(t, b)
	if text == "" || strings.Contains(text, "from") || gjson.GetBytes(b, "candidates.0.finishReason").Str != "STOP" {
		t.Errorf("answer %s", b)
	}
	reqs := env.sim.Requests()
	if up := gjson.ParseBytes(reqs[len(reqs)-1].Body); !up.Get("stream").Bool() {
		t.Errorf("the platform was not asked for a stream: %s", reqs[len(reqs)-1].Body)
	}
}

// candidateCount n is n upstream calls on the exchange's fan-out, joined into one answer:
// n candidates, indexed in order, their usage summed; every call is reserved and charged.
func TestGeminiCandidates(t *testing.T) {
	var sums summaries
	env := startEnv(t, envOptions{hooks: sums.hooks()})
	before := env.upstreamCalls()
	status, _, b := env.do(t, "POST", "/v1beta/models/sim-chat:generateContent", "",
		[]byte(`{"generationConfig":{"candidateCount":3},"contents":[{"parts":[{"text":"hi"}]}]}`),
		"X-Goog-Api-Key", keyAlpha1, "X-Request-Id", "req_gemini_candidates")
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	if n := env.upstreamCalls() - before; n != 3 {
		t.Fatalf("%d platform calls, want 3", n)
	}
	r := gjson.ParseBytes(b)
	cands := r.Get("candidates").Array()
	if len(cands) != 3 {
		t.Fatalf("%d candidates: %s", len(cands), b)
	}
	for i, c := range cands {
		if c.Get("index").Int() != int64(i) || c.Get("content.parts.0.text").Str == "" || c.Get("finishReason").Str != "STOP" {
			t.Errorf("candidate %d: %s", i, c.Raw)
		}
	}
	_, _, one := env.do(t, "POST", "/v1beta/models/sim-chat:generateContent", keyAlpha1, []byte(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	single := gjson.GetBytes(one, "usageMetadata.promptTokenCount").Int()
	if got := r.Get("usageMetadata.promptTokenCount").Int(); single == 0 || got != 3*single {
		t.Errorf("prompt tokens %d, want 3 × %d", got, single)
	}
	if s := sums.wait(t, "req_gemini_candidates"); s.InputTokens != 3*single {
		t.Errorf("settled %d input tokens, want %d", s.InputTokens, 3*single)
	}
}

// An idle Gemini stream gets its framing's keep-alive, which every reader of it skips: a blank
// line between SSE events, a newline between the array's elements; the stream reads the same
// with them as without.
func TestGeminiKeepAlives(t *testing.T) {
	pausing := func() []platformsim.Event {
		evs := steadyEvents(4, 0)
		evs[3].Delay = 1050 * time.Millisecond // ten intervals: late timers still leave several
		return evs
	}
	body := `{"contents":[{"parts":[{"text":"hello"}]}]}`
	for _, c := range []struct{ name, path string }{
		{"sse", "/v1beta/models/sim-chat:streamGenerateContent?alt=sse"},
		{"json_array", "/v1beta/models/sim-chat:streamGenerateContent"},
	} {
		for _, every := range []time.Duration{0, 100 * time.Millisecond} {
			t.Run(c.name+"/"+every.String(), func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(cfg *config.Config) { cfg.Upstream.KeepAliveInterval = every }})
				env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: pausing()})
				code, _, raw := env.call(t, c.path, keyAlpha1, body)
				if code != 200 {
					t.Fatalf("status %d: %s", code, raw)
				}
				s := string(raw)
				chunks := strings.Count(s, `{"candidates"`)
				var keepAlives int
				var text strings.Builder
				if c.name == "sse" {
					keepAlives = strings.Count(s, "\r\n") - 2*chunks
					for ev := range strings.SplitSeq(s, "\r\n\r\n") {
						if data, ok := strings.CutPrefix(strings.TrimLeft(ev, "\r\n"), "data: "); ok {
							text.WriteString(geminiText(t, []byte(data)))
						}
					}
				} else {
					keepAlives = strings.Count(s, "\n") - chunks
					var arr []json.RawMessage
					if err := json.Unmarshal(raw, &arr); err != nil || len(arr) != chunks {
						t.Fatalf("not a JSON array of %d chunks (%v): %q", chunks, err, s)
					}
					for _, ch := range arr {
						text.WriteString(geminiText(t, ch))
					}
				}
				if chunks < 2 || text.Len() == 0 {
					t.Fatalf("%d chunks, text %q: %q", chunks, text.String(), s)
				}
				switch {
				case every == 0 && keepAlives != 0:
					t.Errorf("%d keep-alives with keep-alives off: %q", keepAlives, s)
				case every > 0 && (keepAlives < 3 || keepAlives > 10):
					t.Errorf("%d keep-alives in a 1050ms pause at 100ms, want about 10 (3 to 10): %q", keepAlives, s)
				}
			})
		}
	}
}

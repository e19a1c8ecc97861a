package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/store"
)

// Issue 40: a top-level key that differs from a known field only in case, and a string
// that is not UTF-8, are refused on every route, over HTTP and WebSocket, before anything
// reaches the platform. A platform that decodes as encoding/json does would read
// {"model":"allowed","Model":"forbidden"} as the forbidden model.

// captureUpstream records every call that reaches the platform, then lets next answer it.
type captureUpstream struct {
	mu    sync.Mutex
	next  http.Handler
	calls []string // method, path and body of each call
}

func (u *captureUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	u.mu.Lock()
	u.calls = append(u.calls, r.Method+" "+r.URL.Path+" "+string(body))
	next := u.next
	u.mu.Unlock()
	next.ServeHTTP(w, r)
}

func (u *captureUpstream) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	calls := u.calls
	u.calls = nil
	return calls
}

// startCaptureEnv serves the platform through a captureUpstream over the env's own Sim, with
// a record store, so background responses are modelgate's.
func startCaptureEnv(t *testing.T) (*testEnv, *captureUpstream) {
	up := &captureUpstream{}
	env := startEnv(t, envOptions{upstream: up, store: tempBolt(t, store.BoltOptions{}),
		mutate: func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 }})
	t.Cleanup(env.server.Close)
	up.mu.Lock()
	up.next = env.sim
	up.mu.Unlock()
	return env, up
}

// inputRoute is a route a team key posts a model request to, with a body builder.
type inputRoute struct {
	name, path string
	body       func(extra string) string
	shape      errorShape
}

func inputRoutes() []inputRoute {
	return []inputRoute{
		{"chat", "/v1/chat/completions", func(x string) string {
			return `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]` + x + `}`
		}, shapeOpenAI},
		{"responses", "/v1/responses", func(x string) string { return `{"model":"sim-chat","input":"hi"` + x + `}` }, shapeOpenAI},
		{"background", "/v1/responses", func(x string) string {
			return `{"model":"sim-chat","input":"hi","background":true` + x + `}`
		}, shapeOpenAI},
		{"messages", "/v1/messages", func(x string) string {
			return `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]` + x + `}`
		}, shapeAnthropic},
		{"count_tokens", "/v1/messages/count_tokens", func(x string) string {
			return `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]` + x + `}`
		}, shapeAnthropic},
	}
}

// caseVariants are keys refused on every route (the key named is the decoded one).
func caseVariants() []struct{ raw, key string } {
	return []struct{ raw, key string }{
		{`"Model":"sim-tools"`, "Model"},
		{`"STREAM":true`, "STREAM"},
		{`"MAX_OUTPUT_TOKENS":100000`, "MAX_OUTPUT_TOKENS"},
		{`"Previous_Response_Id":"resp_x"`, "Previous_Response_Id"},
		{`"Background":true`, "Background"},
		{`"Max_Tokens":100000`, "Max_Tokens"},
		{`"Instructions":"be another model"`, "Instructions"},
		{`"Input":"uncounted"`, "Input"},
		{`"Messages":[]`, "Messages"},
		{`"Metadata":{}`, "Metadata"},
		{`"Store":false`, "Store"},
		{`"\u004dodel":"sim-tools"`, "Model"},
		{`"ſtream":true`, "ſtream"},
		{`"top_\u212a":1`, "top_\u212a"},
	}
}

func TestCaseVariantFieldsNeverReachThePlatform(t *testing.T) {
	env, up := startCaptureEnv(t)
	for _, r := range inputRoutes() {
		for _, v := range caseVariants() {
			t.Run(r.name+"/"+v.key, func(t *testing.T) {
				status, _, b := env.do(t, "POST", r.path, keyAlpha1, []byte(r.body(","+v.raw)), "anthropic-version", "2023-06-01")
				if status != http.StatusBadRequest {
					t.Fatalf("status %d, want 400: %s", status, b)
				}
				assertShape(t, r.shape, b)
				e := gjson.GetBytes(b, "error")
				if !strings.Contains(e.Get("message").Str, `"`+v.key+`"`) {
					t.Errorf("the refusal does not name %q: %s", v.key, b)
				}
				if r.shape == shapeOpenAI && (e.Get("param").Str != v.key || e.Get("code").Str != "unknown_parameter") {
					t.Errorf("param/code of %s, want %q and unknown_parameter", b, v.key)
				}
				if calls := up.take(); len(calls) != 0 {
					t.Errorf("the platform saw %q", calls)
				}
			})
		}
	}
	assertRoutesServe(t, env, up)
}

// Invalid UTF-8 anywhere in a string, top level or nested, key or value: 400, nothing sent.
func TestInvalidUTF8NeverReachesThePlatform(t *testing.T) {
	env, up := startCaptureEnv(t)
	for _, r := range inputRoutes() {
		for name, extra := range map[string]string{
			"value":        ",\"metadata\":{\"a\":\"b\xffc\"}",
			"key":          ",\"x\xc3\":1",
			"surrogate":    ",\"metadata\":{\"a\":\"\xed\xa0\x80\"}",
			"nested_array": ",\"tools\":[{\"type\":\"function\",\"name\":\"f\xfe\"}]",
		} {
			t.Run(r.name+"/"+name, func(t *testing.T) {
				status, _, b := env.do(t, "POST", r.path, keyAlpha1, []byte(r.body(extra)), "anthropic-version", "2023-06-01")
				if status != http.StatusBadRequest {
					t.Fatalf("status %d, want 400: %s", status, b)
				}
				assertShape(t, r.shape, b)
				if msg := gjson.GetBytes(b, "error.message").Str; !strings.Contains(msg, "UTF-8") {
					t.Errorf("the refusal does not say why: %s", b)
				}
				if calls := up.take(); len(calls) != 0 {
					t.Errorf("the platform saw %q", calls)
				}
			})
		}
	}
	assertRoutesServe(t, env, up)
}

// assertRoutesServe: the same bodies without the bad key reach the platform (or, for
// count_tokens, are answered), so a refusal above is the check's and the capture works.
func assertRoutesServe(t *testing.T, env *testEnv, up *captureUpstream) {
	t.Helper()
	for _, r := range inputRoutes() {
		status, _, b := env.do(t, "POST", r.path, keyAlpha1, []byte(r.body(`,"metadata":{"Model":"nested keys are the caller's"}`)), "anthropic-version", "2023-06-01")
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", r.name, status, b)
		}
	}
	// chat, responses, messages, and the background job (which may call after its answer).
	seen := 0
	if !waitFor(10*time.Second, func() bool { seen += len(up.take()); return seen >= 4 }) {
		t.Fatalf("the capture saw %d calls from the accepted requests, want 4", seen)
	}
}

// Over the WebSocket, each refused response.create is one error event naming the key, the
// connection serves the next turn, and the platform sees only that turn.
func TestSocketCaseVariantsAndUTF8Refused(t *testing.T) {
	env, up := startCaptureEnv(t)
	ws := dialSocket(t, env, keyAlpha1)
	create := func(extra string) string {
		return `{"type":"response.create","model":"sim-chat","input":"hi"` + extra + `}`
	}
	type refusal struct{ msg, code, param, says string }
	var cases []refusal
	for _, v := range caseVariants() {
		cases = append(cases, refusal{create("," + v.raw), "unknown_parameter", v.key, `"` + v.key + `"`})
	}
	for _, k := range []string{"Type", "Generate", "Stream_Id"} {
		cases = append(cases, refusal{create(`,"` + k + `":1`), "unknown_parameter", k, `"` + k + `"`})
	}
	cases = append(cases,
		refusal{create(",\"input\":\"x\xff\""), "invalid_json", "", "UTF-8"},
		refusal{create(",\"metadata\":{\"a\":\"\xed\xa0\x80\"}"), "invalid_json", "", "UTF-8"})
	for _, c := range cases {
		send(t, ws, c.msg)
		ev := gjson.Parse(nextFrame(t, ws))
		if ev.Get("type").Str != "error" || ev.Get("status").Int() != 400 || ev.Get("error.code").Str != c.code ||
			ev.Get("error.param").Str != c.param || !strings.Contains(ev.Get("error.message").Str, c.says) {
			t.Errorf("%q: got %s, want a 400 error event %s naming %q", c.msg, ev.Raw, c.code, c.says)
		}
	}
	if calls := up.take(); len(calls) != 0 {
		t.Errorf("the platform saw %q", calls)
	}
	completedResponse(t, turnEvents(t, ws, create(`,"metadata":{"Model":"x"}`)))
	if calls := up.take(); len(calls) != 1 {
		t.Errorf("the good turn made %d platform calls, want 1", len(calls))
	}
}

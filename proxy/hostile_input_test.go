package proxy

import (
	"encoding/base64"
	"net/http"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/store"
	"modelgate/translate"
)

// The parse side of hostile input on every route a team key reaches (the admin API's own
// table is admin.TestCreateKeyHostileBodies): deep nesting, oversized fields, repeated
// fields, wrong types and bad encodings each get the right 4xx in the route's own shape,
// nothing reaches the platform, and the server goes on answering.

type hostileCase struct {
	name, method, path string
	body               []byte
	gzip               bool
	hdr                []string
	want               int
	shape              errorShape
}

// nest wraps inner in n arrays.
func nest(n int, inner string) string { return strings.Repeat("[", n) + inner + strings.Repeat("]", n) }

func hostileCases(t *testing.T) []hostileCase {
	past := nest(translate.MaxEventDepth, "1") // one level past the bound inside an object
	longModel := strings.Repeat("m", translate.MaxModelNameBytes+1)
	chat := func(extra string) string {
		return `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	resp := func(extra string) string { return `{"model":"sim-chat","input":"hi"` + extra + `}` }
	msgs := func(extra string) string {
		return `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	block := func(b string) string {
		return `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":[` + b + `]}]}`
	}
	sig := "mgsig1." + base64.RawURLEncoding.EncodeToString([]byte(nest(translate.MaxEventDepth+1, "")))
	thinking := `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"` + sig + `"}]},{"role":"user","content":"go"}]}`
	deepGzip := gzipped(t, []byte(strings.Repeat("[", 512<<10))) // inflates to half the body limit
	over := strings.Repeat("x", 1<<20)

	var cases []hostileCase
	add := func(name, method, path, body string, want int, shape errorShape, hdr ...string) {
		cases = append(cases, hostileCase{name: name, method: method, path: path, body: []byte(body), want: want, shape: shape, hdr: hdr})
	}
	addGzip := func(name, path string, body []byte, want int, shape errorShape) {
		cases = append(cases, hostileCase{name: name, method: "POST", path: path, body: body, gzip: true, want: want, shape: shape})
	}
	for _, r := range []struct {
		route string
		path  string
		body  func(string) string
		shape errorShape
	}{
		{"chat", "/v1/chat/completions", chat, shapeOpenAI},
		{"responses", "/v1/responses", resp, shapeOpenAI},
		{"background", "/v1/responses", func(x string) string { return resp(`,"background":true` + x) }, shapeOpenAI},
		{"messages", "/v1/messages", msgs, shapeAnthropic},
		{"count_tokens", "/v1/messages/count_tokens", msgs, shapeAnthropic},
	} {
		p := r.route + "_"
		add(p+"deep_nesting", "POST", r.path, r.body(`,"metadata":{"a":`+past+`}`), 400, r.shape)
		add(p+"only_brackets", "POST", r.path, strings.Repeat("[", 64<<10), 400, r.shape)
		addGzip(p+"deep_gzip", r.path, deepGzip, 400, r.shape)
		add(p+"model_oversized", "POST", r.path, strings.Replace(r.body(""), `"sim-chat"`, `"`+longModel+`"`, 1), 400, r.shape)
		add(p+"model_repeated", "POST", r.path, r.body(`,"model":"sim-tools"`), 400, r.shape)
		add(p+"model_repeated_escaped", "POST", r.path, r.body(`,"\u006dodel":"sim-tools"`), 400, r.shape)
		add(p+"stream_repeated", "POST", r.path, r.body(`,"stream":false,"stream":true`), 400, r.shape)
		add(p+"model_wrong_type", "POST", r.path, strings.Replace(r.body(""), `"sim-chat"`, `["sim-chat"]`, 1), 400, r.shape)
		add(p+"body_oversized", "POST", r.path, r.body(`,"x":"`+over+`"`), 413, r.shape)
		add(p+"not_gzip", "POST", r.path, r.body(""), 400, r.shape, "Content-Encoding", "gzip")
		add(p+"unknown_encoding", "POST", r.path, r.body(""), 415, r.shape, "Content-Encoding", "br")
		add(p+"trailing_garbage", "POST", r.path, r.body("")+"{}", 400, r.shape)
	}
	// The cap each route reads, repeated.
	add("chat_max_tokens_repeated", "POST", "/v1/chat/completions", chat(`,"max_tokens":1,"max_tokens":100000`), 400, shapeOpenAI)
	add("chat_max_completion_tokens_repeated", "POST", "/v1/chat/completions", chat(`,"max_completion_tokens":1,"max_completion_tokens":9`), 400, shapeOpenAI)
	add("responses_max_output_tokens_repeated", "POST", "/v1/responses", resp(`,"max_output_tokens":16,"max_output_tokens":100000`), 400, shapeOpenAI)
	add("responses_previous_repeated", "POST", "/v1/responses", resp(`,"previous_response_id":null,"previous_response_id":"resp_x"`), 400, shapeOpenAI)
	add("responses_store_repeated", "POST", "/v1/responses", resp(`,"store":false,"store":true`), 400, shapeOpenAI)
	add("background_repeated", "POST", "/v1/responses", resp(`,"background":false,"background":true`), 400, shapeOpenAI)
	add("messages_max_tokens_repeated", "POST", "/v1/messages", msgs(`,"max_tokens":100000`), 400, shapeAnthropic)
	add("count_tokens_max_tokens_repeated", "POST", "/v1/messages/count_tokens", msgs(`,"max_tokens":100000`), 400, shapeAnthropic)
	// Wrong types.
	add("responses_previous_number", "POST", "/v1/responses", resp(`,"previous_response_id":5`), 400, shapeOpenAI)
	add("background_string", "POST", "/v1/responses", resp(`,"background":"yes"`), 400, shapeOpenAI)
	add("background_with_stream", "POST", "/v1/responses", resp(`,"background":true,"stream":true`), 400, shapeOpenAI)
	add("messages_max_tokens_string", "POST", "/v1/messages", msgs(`,"max_tokens":"16"`), 400, shapeAnthropic)
	// Oversized identifiers.
	add("responses_previous_oversized", "POST", "/v1/responses", resp(`,"previous_response_id":"resp_`+strings.Repeat("a", 4096)+`"`), 400, shapeOpenAI)
	// Messages content the platform must never be handed.
	add("messages_image_not_base64", "POST", "/v1/messages", block(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!!"}}`), 400, shapeAnthropic)
	add("messages_image_html", "POST", "/v1/messages", block(`{"type":"image","source":{"type":"base64","media_type":"text/html","data":"PGI+"}}`), 400, shapeAnthropic)
	add("messages_image_file_url", "POST", "/v1/messages", block(`{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}`), 400, shapeAnthropic)
	add("messages_document_file_url", "POST", "/v1/messages", block(`{"type":"document","source":{"type":"url","url":"file:///etc/passwd"}}`), 400, shapeAnthropic)
	add("count_tokens_document_file_url", "POST", "/v1/messages/count_tokens", block(`{"type":"document","source":{"type":"url","url":"file:///etc/passwd"}}`), 400, shapeAnthropic)
	add("messages_signature_deep", "POST", "/v1/messages", thinking, 400, shapeAnthropic)
	// Stored responses: ids that cannot name a kept response.
	long := "resp_" + strings.Repeat("a", 4096)
	add("stored_get_oversized_id", "GET", "/v1/responses/"+long, "", 404, shapeOpenAI)
	add("stored_get_encoded_slash", "GET", "/v1/responses/resp_a%2F..%2Fb", "", 404, shapeOpenAI)
	add("stored_delete_oversized_id", "DELETE", "/v1/responses/"+long, "", 404, shapeOpenAI)
	add("stored_cancel_oversized_id", "POST", "/v1/responses/"+long+"/cancel", "", 404, shapeOpenAI)
	add("stored_items_bad_limit", "GET", "/v1/responses/resp_a/input_items?limit=abc", "", 400, shapeOpenAI)
	// Sidecar routes: parameters are validated before anything is proxied.
	add("sidecar_page_not_a_number", "GET", modelRunListPath+"?page=abc", "", 400, shapeEnvelope)
	add("sidecar_param_repeated", "GET", modelRunListPath+"?page=1&page=2", "", 400, shapeEnvelope)
	add("sidecar_param_oversized", "GET", modelRunListPath+"?status="+strings.Repeat("s", 8192), "", 400, shapeEnvelope)
	add("sidecar_unknown_param", "GET", modelRunListPath+"?url=http://evil.example", "", 400, shapeEnvelope)
	add("sidecar_run_id_traversal", "GET", modelRunInfoPath+"?run_id=..%2F..%2Fetc", "", 400, shapeEnvelope)
	add("sidecar_upload_json", "POST", assetsPath, `{"file":"x"}`, 400, shapeEnvelope, "Content-Type", "application/json")
	add("sidecar_asset_id_oversized", "GET", assetsPath+"/"+strings.Repeat("a", 4096), "", 400, shapeEnvelope)
	return cases
}

func TestHostileInputEveryRoute(t *testing.T) {
	st := tempBolt(t, store.BoltOptions{})
	env := startEnv(t, envOptions{store: st, mutate: func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 }})
	t.Cleanup(env.server.Close)
	for _, tc := range hostileCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			env.sim.Reset()
			hdr := append([]string{"Content-Type", "application/json"}, tc.hdr...)
			if tc.gzip {
				hdr = append(hdr, "Content-Encoding", "gzip")
			}
			status, _, b := env.do(t, tc.method, tc.path, keyAlpha1, tc.body, hdr...)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %.300s", status, tc.want, b)
			}
			assertShape(t, tc.shape, b)
			if len(b) > 2048 {
				t.Errorf("the refusal is %d bytes: it echoes the input", len(b))
			}
			if n := len(env.sim.Requests()); n != 0 {
				t.Errorf("the platform saw %d requests", n)
			}
		})
	}
	// Still serving, on every route family.
	for _, ok := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"sim-chat","input":"hi"}`},
		{"/v1/messages", `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		if status, _, b := env.do(t, "POST", ok.path, keyAlpha1, []byte(ok.body)); status != 200 {
			t.Fatalf("after the hostile inputs, %s: %d %s", ok.path, status, b)
		}
	}
}

func assertShape(t *testing.T, shape errorShape, b []byte) {
	t.Helper()
	e := gjson.ParseBytes(b)
	switch shape {
	case shapeOpenAI:
		if !gjson.ValidBytes(b) || e.Get("error.message").Str == "" || e.Get("error.type").Str == "" || e.Get("type").Exists() {
			t.Errorf("not an OpenAI error: %.300s", b)
		}
	case shapeAnthropic:
		if e.Get("type").Str != "error" || e.Get("error.type").Str == "" || e.Get("error.message").Str == "" {
			t.Errorf("not an Anthropic error: %.300s", b)
		}
	case shapeEnvelope:
		if !e.Get("code").Exists() || !e.Get("msg").Exists() || e.Get("error").Exists() {
			t.Errorf("not a platform envelope: %.300s", b)
		}
	}
}

const crashChildEnv = "MODELGATE_PROXY_CRASH_CHILD"

// The crash inputs of issue 24 at full size, over HTTP, in a child process whose stacks are
// capped at 64 MiB: 16 Mi '[' gzipped (about 16 KB on the wire) on /v1/messages and
// count_tokens, and a thinking signature of 20e6 '['. On a validator that recursed without
// bound the child dies of a stack overflow and the test fails; here each is a 400.
func TestCrashInputsAnswer400(t *testing.T) {
	if testing.Short() {
		t.Skip("sends bodies of tens of megabytes")
	}
	if inChild, out, err := apitest.RunInChild(t, crashChildEnv); !inChild {
		if err != nil {
			t.Fatalf("the server process died or a check failed: %v\n%.4000s", err, out)
		}
		return
	}
	debug.SetMaxStack(64 << 20)
	env := startEnv(t, envOptions{mutate: func(c *config.Config) { c.Server.MaxBodyBytes = 64 << 20 }})
	deep := gzipped(t, []byte(strings.Repeat("[", 16<<20)))
	sig := "mgsig1." + base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("[", 20e6)))
	thinking := `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"` + sig + `"}]},{"role":"user","content":"go"}]}`
	for _, tc := range []struct {
		name, path string
		body       []byte
		gzip       bool
		shape      errorShape
	}{
		{"messages", "/v1/messages", deep, true, shapeAnthropic},
		{"count_tokens", "/v1/messages/count_tokens", deep, true, shapeAnthropic},
		{"chat", "/v1/chat/completions", deep, true, shapeOpenAI},
		{"responses", "/v1/responses", deep, true, shapeOpenAI},
		{"signature", "/v1/messages", []byte(thinking), false, shapeAnthropic},
		{"signature_count_tokens", "/v1/messages/count_tokens", []byte(thinking), false, shapeAnthropic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := []string{"Content-Type", "application/json"}
			if tc.gzip {
				hdr = append(hdr, "Content-Encoding", "gzip")
			}
			status, _, b := env.do(t, "POST", tc.path, keyAlpha1, tc.body, hdr...)
			if status != 400 {
				t.Fatalf("status %d: %.300s", status, b)
			}
			assertShape(t, tc.shape, b)
		})
	}
	if n := len(env.sim.Requests()); n != 0 {
		t.Errorf("the platform saw %d requests", n)
	}
}

// TestHostileStalledBodyEveryRoute: the stalled-body row of the hostile-input table, on every
// route that reads a JSON body: a body that stops arriving is a 408 in the route's own shape
// once server.body_read_timeout has passed, nothing reaches the platform, and the server
// goes on answering. (The sidecar upload streams to the platform as it arrives and is cut
// after server.upload_idle_timeout without data, in sidecar_upload_test.go; the admin API's
// row is in package admin.)
func TestHostileStalledBodyEveryRoute(t *testing.T) {
	const timeout = 200 * time.Millisecond
	st := tempBolt(t, store.BoltOptions{})
	env := startEnv(t, envOptions{store: st, mutate: func(c *config.Config) { c.Server.BodyReadTimeout = timeout }})
	t.Cleanup(env.server.Close)
	for _, r := range []struct {
		name, path, start string
		shape             errorShape
	}{
		{"chat", "/v1/chat/completions", `{"model":"sim-chat","messages":[`, shapeOpenAI},
		{"responses", "/v1/responses", `{"model":"sim-chat","input":"`, shapeOpenAI},
		{"background", "/v1/responses", `{"model":"sim-chat","background":true,"input":"`, shapeOpenAI},
		{"messages", "/v1/messages", `{"model":"sim-chat","max_tokens":16,"messages":[`, shapeAnthropic},
		{"count_tokens", "/v1/messages/count_tokens", `{"model":"sim-chat","messages":[`, shapeAnthropic},
	} {
		t.Run(r.name, func(t *testing.T) {
			env.sim.Reset()
			resp, b, err := sendStalled(t, env.front.URL, "POST", r.path, keyAlpha1, 64<<10, []byte(r.start), 10*time.Second)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("status %d, want 408: %.300s", resp.StatusCode, b)
			}
			assertShape(t, r.shape, b)
			if n := len(env.sim.Requests()); n != 0 {
				t.Errorf("the platform saw %d requests", n)
			}
		})
	}
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`)); status != 200 {
		t.Fatalf("after the stalled bodies: %d %s", status, b)
	}
}

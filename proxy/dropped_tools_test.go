package proxy

import (
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/config"
)

// lastPlatformBody is the body of the platform's last /v1/responses call.
func lastPlatformBody(t *testing.T, env *testEnv) gjson.Result {
	t.Helper()
	var last []byte
	for _, r := range env.sim.Requests() {
		if r.Path == "/v1/responses" {
			last = r.Body
		}
	}
	if last == nil {
		t.Fatal("the platform was not called")
	}
	return gjson.ParseBytes(last)
}

// platformToolNames lists the tools the platform got, as type:name.
func platformToolNames(body gjson.Result) []string {
	var out []string
	for _, tool := range body.Get("tools").Array() {
		out = append(out, tool.Get("type").Str+":"+tool.Get("name").Str)
	}
	return out
}

// Cline's default: Anthropic's hosted web search beside a function tool. The call is
// answered, the platform sees the function tool alone, and the header names what was dropped
// (issue 45). The same on chat (web_search_options) and on /v1/responses (hosted tools).
func TestServerToolsDropped(t *testing.T) {
	cases := []struct {
		name, path, body string
		header           string
		tools            []string
	}{
		{"messages", "/v1/messages", `{"model":"sim-chat","max_tokens":64,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5},` +
			`{"name":"read_file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}},{"type":"web_fetch_20250910","name":"web_fetch"}],` +
			`"messages":[{"role":"user","content":"hi"}]}`, "web_search,web_fetch", []string{"function:read_file"}},
		{"chat", "/v1/chat/completions", `{"model":"sim-chat","web_search_options":{},"tools":[{"type":"function","function":{"name":"read_file"}}],` +
			`"messages":[{"role":"user","content":"hi"}]}`, "web_search", []string{"function:read_file"}},
		{"responses", "/v1/responses", `{"model":"sim-chat","tools":[{"type":"web_search_preview"},{"type":"function","name":"read_file","parameters":{"type":"object"}},` +
			`{"type":"file_search","vector_store_ids":["vs_1"]}],"input":"hi"}`, "web_search_preview,file_search", []string{"function:read_file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv(t, "", nil)
			h, _ := env.post(t, c.path, keyAlpha1, []byte(c.body), 200)
			if got := h.Get(droppedToolsHeader); got != c.header {
				t.Errorf("%s: %q, want %q", droppedToolsHeader, got, c.header)
			}
			if got := platformToolNames(lastPlatformBody(t, env)); !slices.Equal(got, c.tools) {
				t.Errorf("platform tools %v, want %v", got, c.tools)
			}
		})
	}
}

// A call without a dropped tool carries no header.
func TestNoDroppedToolsNoHeader(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, h, b := env.do(t, "POST", "/v1/messages", keyAlpha1, messagesBody("sim-chat"))
	if status != 200 || h.Get(droppedToolsHeader) != "" {
		t.Fatalf("%d, header %q: %s", status, h.Get(droppedToolsHeader), b)
	}
}

// A bash_20250124 tool reaches the platform as a function tool named bash with its command
// parameter, and the platform's call of it comes back as a tool_use named bash, streamed and
// not.
func TestClientRunToolRoundTrip(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			env := newTestEnv(t, "", nil)
			body := `{"model":"sim-tools","max_tokens":256,"stream":` + map[bool]string{false: "false", true: "true"}[stream] +
				`,"tools":[{"type":"bash_20250124","name":"bash"}],"messages":[{"role":"user","content":"list the files"}]}`
			h, b := env.post(t, "/v1/messages", keyAlpha1, []byte(body), 200)
			if h.Get(droppedToolsHeader) != "" {
				t.Errorf("a client-run tool reported dropped: %q", h.Get(droppedToolsHeader))
			}
			fn := lastPlatformBody(t, env).Get("tools.0")
			if fn.Get("type").Str != "function" || fn.Get("name").Str != "bash" || fn.Get("parameters.properties.command.type").Str != "string" ||
				fn.Get("parameters.properties.restart.type").Str != "boolean" {
				t.Fatalf("platform tool %s, want function bash with command and restart", fn.Raw)
			}
			var use gjson.Result
			if stream {
				for _, ev := range parseSSE(t, b) {
					if blk := gjson.Get(ev.data, "content_block"); ev.typ == "content_block_start" && blk.Get("type").Str == "tool_use" {
						use = blk
					}
				}
			} else {
				for _, blk := range gjson.GetBytes(b, "content").Array() {
					if blk.Get("type").Str == "tool_use" {
						use = blk
					}
				}
				if gjson.GetBytes(b, "stop_reason").Str != "tool_use" {
					t.Errorf("stop_reason %q, want tool_use", gjson.GetBytes(b, "stop_reason").Str)
				}
			}
			if use.Get("name").Str != "bash" || use.Get("id").Str == "" {
				t.Errorf("tool_use %s, want one named bash: %s", use.Raw, tail(b))
			}
		})
	}
}

// translate.server_tools: refuse answers a server tool with a 400 in the route's shape and
// nothing reaches the platform.
func TestServerToolsRefused(t *testing.T) {
	refuse := func(c *config.Config) { c.Translate.ServerTools = config.ServerToolsRefuse }
	cases := []struct{ name, path, body string }{
		{"messages", "/v1/messages", `{"model":"sim-chat","max_tokens":64,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`},
		{"count_tokens", "/v1/messages/count_tokens", `{"model":"sim-chat","tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`},
		{"chat", "/v1/chat/completions", `{"model":"sim-chat","web_search_options":{},"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"sim-chat","tools":[{"type":"code_interpreter","container":{"type":"auto"}}],"input":"hi"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv(t, "", refuse)
			_, b := env.post(t, c.path, keyAlpha1, []byte(c.body), 400)
			if c.path == "/v1/messages" || c.path == "/v1/messages/count_tokens" {
				assertAnthropicError(t, b, "invalid_request_error")
			} else if gjson.GetBytes(b, "error.code").Str != "unsupported_value" || gjson.GetBytes(b, "error.param").Str == "" {
				t.Errorf("body %s, want OpenAI's unsupported_value with its param", b)
			}
			if env.upstreamCalls() != 0 {
				t.Errorf("the platform was called %d times", env.upstreamCalls())
			}
		})
	}
}

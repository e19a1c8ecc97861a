package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/platformsim"
)

type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// assertOpenAIError checks body is {"error":{message,type,param,code}} with a message.
func assertOpenAIError(t *testing.T, body []byte) errorBody {
	t.Helper()
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	var raw map[string]map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw)
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error body lacks %q: %s", k, body)
		}
	}
	return e
}

func TestResponsesNonStreamPassthrough(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, hdr, body := env.do(t, "POST", "/v1/responses", keyAlpha1,
		[]byte(`{"model":"gpt-4o-mini","input":"hello there","api_base":"http://evil.example"}`),
		"X-Request-Id", "client-req-42", "X-Forwarded-For", "10.1.2.3", "Connection", "X-Team")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	ours := hdr.Get("X-Request-Id")
	if !strings.HasPrefix(ours, "req_") {
		t.Errorf("X-Request-Id = %q, want modelgate's own (the client's is only logged)", ours)
	}
	var resp struct {
		Object string `json:"object"`
		Usage  struct {
			InputTokens int64 `json:"input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Object != "response" || resp.Usage.InputTokens == 0 {
		t.Fatalf("unexpected answer: %s", body)
	}
	reqs := env.sim.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(reqs))
	}
	up := reqs[0]
	if up.Path != "/v1/responses" {
		t.Errorf("upstream path %q", up.Path)
	}
	if got := up.Header.Get("Authorization"); got != "Bearer "+env.canary {
		t.Errorf("upstream Authorization is not the platform key")
	}
	if up.Header.Get("X-Request-Id") != ours {
		t.Errorf("upstream X-Request-Id %q, want modelgate's %q", up.Header.Get("X-Request-Id"), ours)
	}
	for _, h := range []string{"X-Forwarded-For", "X-Team"} {
		if up.Header.Get(h) != "" {
			t.Errorf("client header %s reached the platform", h)
		}
	}
	var sent map[string]any
	if err := json.Unmarshal(up.Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent["model"] != "sim-chat" {
		t.Errorf("alias not applied: model %v", sent["model"])
	}
	if _, ok := sent["api_base"]; ok {
		t.Errorf("api_base reached the platform")
	}
}

func TestResponsesBadInputNeverReachesUpstream(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxBodyBytes = 2048 })
	big := `{"model":"sim-chat","input":"` + strings.Repeat("x", 4096) + `"}`
	tests := []struct {
		name       string
		key        string
		body       string
		chunked    bool
		wantStatus int
		wantParam  string
	}{
		{"malformed_json", keyAlpha1, `{"model":`, false, 400, ""},
		{"array_body", keyAlpha1, `[1,2]`, false, 400, ""},
		{"empty_body", keyAlpha1, ``, false, 400, ""},
		{"missing_model", keyAlpha1, `{"input":"hi"}`, false, 400, "model"},
		{"model_not_string", keyAlpha1, `{"model":7,"input":"hi"}`, false, 400, "model"},
		{"missing_input", keyAlpha1, `{"model":"sim-chat"}`, false, 400, "input"},
		{"stream_not_bool", keyAlpha1, `{"model":"sim-chat","input":"hi","stream":"yes"}`, false, 400, "stream"},
		{"oversized_with_length", keyAlpha1, big, false, 413, ""},
		{"oversized_chunked", keyAlpha1, big, true, 413, ""},
		{"unknown_key", "mg-nobody", `{"model":"sim-chat","input":"hi"}`, false, 401, ""},
		{"missing_key", "", `{"model":"sim-chat","input":"hi"}`, false, 401, ""},
		{"canary_as_client_key", "", `{"model":"sim-chat","input":"hi"}`, false, 401, ""},
		{"model_not_allowed", keyBeta, `{"model":"sim-tools","input":"hi"}`, false, 404, "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.sim.Reset()
			key := tt.key
			if tt.name == "canary_as_client_key" {
				key = env.canary
			}
			var rd io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				rd = io.MultiReader(strings.NewReader(tt.body)) // hides the length: sent chunked
			}
			status, h, body := apitest.Do(t, "POST", env.front.URL+"/v1/responses", key, rd)
			env.assertCanaryAbsent(t, h, body)
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tt.wantStatus, body)
			}
			e := assertOpenAIError(t, body)
			if tt.wantParam != "" && (e.Error.Param == nil || *e.Error.Param != tt.wantParam) {
				t.Errorf("param = %v, want %q", e.Error.Param, tt.wantParam)
			}
			if n := env.upstreamCalls(); n != 0 {
				t.Errorf("upstream saw %d requests, want 0", n)
			}
		})
	}
}

// streamEvents is a scripted upstream stream that pauses before its second half.
func streamEvents(pause time.Duration) []platformsim.Event {
	evs := []platformsim.Event{
		{Type: "response.created", Data: `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"sim-chat","output":[],"usage":null}}`},
		{Type: "response.in_progress", Data: `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"sim-chat","output":[],"usage":null}}`},
		{Type: "response.output_item.added", Data: `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}}`},
		{Type: "response.output_text.delta", Data: `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel"}`},
		{Type: "response.output_text.delta", Data: `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"lo"}`, Delay: pause},
		{Type: "response.completed", Data: `{"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","object":"response","status":"completed","model":"sim-chat","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[]}]}],"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}}`},
	}
	return evs
}

func TestResponsesStreamArrivesEventByEventUnchanged(t *testing.T) {
	env := newTestEnv(t, "", nil)
	const pause = 400 * time.Millisecond

	// What the platform puts on the wire, read straight from the simulator.
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: streamEvents(pause)})
	direct, _ := http.NewRequest("POST", env.simSrv.URL+"/v1/responses", strings.NewReader(`{"model":"sim-chat","input":"hi","stream":true}`))
	direct.Header.Set("Authorization", "Bearer "+env.canary)
	dresp, err := http.DefaultClient.Do(direct)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(dresp.Body)
	dresp.Body.Close()

	env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: streamEvents(pause)})
	req, _ := http.NewRequest("POST", env.front.URL+"/v1/responses", strings.NewReader(`{"model":"sim-chat","input":"hi","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+keyAlpha1)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got bytes.Buffer
	r := bufio.NewReader(io.TeeReader(resp.Body, &got))
	// Read up to the first delta: it must arrive well before the upstream's pause ends.
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended early: %v", err)
		}
		if strings.Contains(line, `"delta":"Hel"`) {
			break
		}
	}
	if early := time.Since(start); early >= pause {
		t.Errorf("first delta arrived after %v: the stream was buffered", early)
	}
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < pause {
		t.Errorf("stream finished before the upstream pause: scripted reply not used")
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("client bytes differ from upstream bytes\n got: %q\nwant: %q", got.Bytes(), want)
	}
}

func TestResponsesUpstreamErrorsKeepStatus(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { zero := 0; c.Upstream.MaxRetries = &zero })
	tests := []struct {
		name       string
		reply      platformsim.Reply
		wantStatus int
		wantHeader string
	}{
		{"rate_limited", platformsim.Reply{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: []byte(`{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)}, 429, "Retry-After"},
		{"server_error_html", platformsim.Reply{Status: 500, Body: []byte(`<html><body>boom at 10.0.0.7</body></html>`)}, 500, ""},
		{"bad_request_envelope", platformsim.Reply{Status: 400, Body: []byte(`{"code":1,"msg":"parameter parse failure"}`)}, 400, ""},
		{"platform_rejects_our_key", platformsim.Reply{Status: 401, Body: []byte(`{"error":{"message":"bad key","type":"invalid_request_error"}}`)}, 502, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.sim.Enqueue("/v1/responses", tt.reply)
			status, hdr, body := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`))
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tt.wantStatus, body)
			}
			assertOpenAIError(t, body)
			if tt.wantHeader != "" && hdr.Get(tt.wantHeader) == "" {
				t.Errorf("header %s not relayed", tt.wantHeader)
			}
			if bytes.Contains(body, []byte("<html")) || bytes.Contains(body, []byte("10.0.0.7")) {
				t.Errorf("raw upstream error text leaked: %s", body)
			}
		})
	}
}

func TestUpstreamUnreachableIs502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more: connection refused
	env := newTestEnv(t, "", func(c *config.Config) { c.Upstream.GatewayURL = dead })
	env.server.platform = mustClient(t, dead)
	status, _, body := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`))
	if status != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %s", status, body)
	}
	assertOpenAIError(t, body)
}

func TestUnknownRouteIsOpenAI404(t *testing.T) {
	env := newTestEnv(t, "", nil)
	for _, path := range []string{"/v1/nothing", "/v2/chat", "/v1/responses/extra"} {
		status, _, body := env.do(t, "GET", path, keyAlpha1, nil)
		if status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, status)
			continue
		}
		assertOpenAIError(t, body)
	}
	if env.upstreamCalls() != 0 {
		t.Errorf("unknown routes reached the platform")
	}
}

func TestModelsFilteredByAllowList(t *testing.T) {
	env := newTestEnv(t, "", nil)
	list := func(key string) []string {
		status, _, body := env.do(t, "GET", "/v1/models", key, nil)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		var l struct {
			Object string `json:"object"`
			Data   []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &l); err != nil || l.Object != "list" {
			t.Fatalf("bad list: %s", body)
		}
		var ids []string
		for _, m := range l.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got := strings.Join(list(keyAlpha1), ","); got != "gpt-4o-mini,sim-chat,sim-tools,sim-long,sim-slow" {
		t.Errorf("alpha sees %s", got)
	}
	if got := strings.Join(list(keyBeta), ","); got != "sim-chat" {
		t.Errorf("beta sees %s", got)
	}
	if status, _, _ := env.do(t, "GET", "/v1/models/sim-tools", keyBeta, nil); status != 404 {
		t.Errorf("beta can read a model outside its allow-list: %d", status)
	}
	if status, _, _ := env.do(t, "GET", "/v1/models/sim-tools", keyAlpha1, nil); status != 200 {
		t.Errorf("alpha cannot read sim-tools: %d", status)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	env := newTestEnv(t, "", nil)
	if status, _, _ := env.do(t, "GET", "/healthz", "", nil); status != 200 {
		t.Errorf("healthz %d", status)
	}
	if status, _, _ := env.do(t, "GET", "/readyz", "", nil); status != 200 {
		t.Errorf("readyz %d", status)
	}
	env.server.SetReady(false)
	if status, _, _ := env.do(t, "GET", "/readyz", "", nil); status != 503 {
		t.Errorf("readyz when platform down: %d, want 503", status)
	}
}

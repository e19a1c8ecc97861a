package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/relay"
)

// Hostile bodies are refused locally with a 4xx in OpenAI shape, and nothing goes upstream.
func TestHostileBodies(t *testing.T) {
	env := newResEnv(t, envOptions{mutate: func(c *config.Config) { c.Server.MaxBodyBytes = 4096 }})
	over := func(prefix string) string { // exactly one byte over the 4096-byte limit
		s := prefix + `","x":"`
		return s + strings.Repeat("a", 4096-len(s)-1) + `"}` // 4097 bytes
	}
	deep := strings.Repeat("[", 2000) + strings.Repeat("]", 2000)
	tests := []struct {
		name, path, body string
		chunked          bool
		want             int
	}{
		{"responses_truncated_json", "/v1/responses", `{"model":"sim-chat","input":"hi"`, false, 400},
		{"responses_trailing_garbage", "/v1/responses", `{"model":"sim-chat","input":"hi"} trailing`, false, 400},
		{"responses_two_objects", "/v1/responses", `{"model":"sim-chat","input":"hi"}{"model":"x"}`, false, 400},
		{"responses_string_body", "/v1/responses", `"hello"`, false, 400},
		{"responses_null_body", "/v1/responses", `null`, false, 400},
		{"responses_input_number", "/v1/responses", `{"model":"sim-chat","input":5}`, false, 400},
		{"responses_input_object", "/v1/responses", `{"model":"sim-chat","input":{"a":1}}`, false, 400},
		{"responses_model_array", "/v1/responses", `{"model":["sim-chat"],"input":"hi"}`, false, 400},
		{"responses_model_empty", "/v1/responses", `{"model":"","input":"hi"}`, false, 400},
		{"responses_max_output_string", "/v1/responses", `{"model":"sim-chat","input":"hi","max_output_tokens":"10"}`, false, 400},
		{"responses_max_output_fraction", "/v1/responses", `{"model":"sim-chat","input":"hi","max_output_tokens":1.5}`, false, 400},
		{"responses_max_output_negative", "/v1/responses", `{"model":"sim-chat","input":"hi","max_output_tokens":-1}`, false, 400},
		{"responses_stream_number", "/v1/responses", `{"model":"sim-chat","input":"hi","stream":1}`, false, 400},
		{"responses_model_path_trick_not_allowed", "/v1/responses", `{"model":"../../sim-tools","input":"hi"}`, false, 404},
		{"responses_over_limit", "/v1/responses", over(`{"model":"sim-chat","input":"hi`), false, 413},
		{"responses_over_limit_chunked", "/v1/responses", over(`{"model":"sim-chat","input":"hi`), true, 413},
		{"chat_truncated_json", "/v1/chat/completions", `{"model":"sim-chat","messages":[`, false, 400},
		{"chat_messages_string", "/v1/chat/completions", `{"model":"sim-chat","messages":"hi"}`, false, 400},
		{"chat_messages_missing", "/v1/chat/completions", `{"model":"sim-chat"}`, false, 400},
		{"chat_messages_empty", "/v1/chat/completions", `{"model":"sim-chat","messages":[]}`, false, 400},
		{"chat_role_number", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":7,"content":"hi"}]}`, false, 400},
		{"chat_role_unknown", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"root","content":"hi"}]}`, false, 400},
		{"chat_content_number", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":5}]}`, false, 400},
		{"chat_model_number", "/v1/chat/completions", `{"model":5,"messages":[{"role":"user","content":"hi"}]}`, false, 400},
		{"chat_stream_string", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, false, 400},
		{"chat_n_string", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"n":"2"}`, false, 400},
		{"chat_n_zero", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"n":0}`, false, 400},
		{"chat_temperature_string", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, false, 400},
		{"chat_max_tokens_negative", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"max_tokens":-5}`, false, 400},
		{"chat_deep_nesting", "/v1/chat/completions", `{"model":"sim-chat","messages":` + deep + `}`, false, 400},
		{"chat_over_limit", "/v1/chat/completions", over(`{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"u":"`), false, 413},
		{"chat_over_limit_chunked", "/v1/chat/completions", over(`{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"u":"`), true, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.sim.Reset()
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			key := keyAlpha1
			if tt.want == 404 {
				key = keyBeta // beta may use sim-chat only
			}
			status, _, got := apitest.Send(t, env.client, apitest.NewRequest(t, context.Background(), http.MethodPost, env.front.URL+tt.path, key, body))
			if status != tt.want {
				t.Fatalf("status %d, want %d: %s", status, tt.want, got)
			}
			assertOpenAIError(t, got)
			if n := len(env.sim.Requests()); n != 0 {
				t.Errorf("platform saw %d requests", n)
			}
		})
	}
	// The limit itself is accepted: the bound is exact.
	t.Run("responses_at_limit_accepted", func(t *testing.T) {
		env.sim.Reset()
		s := `{"model":"sim-chat","input":"hi","x":"`
		body := s + strings.Repeat("a", 4096-len(s)-2) + `"}`
		if code, _, got := env.call(t, "/v1/responses", keyAlpha1, body); code != 200 {
			t.Fatalf("a body of exactly the limit: status %d: %s", code, got)
		}
	})
}

// Odd Authorization headers get 401 in OpenAI shape and nothing goes upstream. Headers Go's
// client refuses to send are written on a raw connection.
func TestHostileAuthHeaders(t *testing.T) {
	env := newResEnv(t, envOptions{})
	big := "Bearer " + strings.Repeat("k", 16<<10)
	tests := []struct {
		name, auth string
		raw        bool // sent as raw bytes
		want       int
	}{
		{"missing", "", false, 401},
		{"bearer_only", "Bearer", false, 401},
		{"bearer_space", "Bearer ", false, 401},
		{"basic", "Basic bWctYWxwaGEta2V5LTE6", false, 401},
		{"token_scheme", "Token " + keyAlpha1, false, 401},
		{"key_without_scheme", keyAlpha1, false, 401},
		{"key_prefix", "Bearer mg-alpha-key-", false, 401},
		{"key_extended", "Bearer " + keyAlpha1 + "x", false, 401},
		{"two_keys", "Bearer " + keyAlpha1 + ", Bearer " + keyBeta, false, 401},
		{"sql", "Bearer ' OR '1'='1", false, 401},
		{"format_verbs", "Bearer %s%n%x%p", false, 401},
		{"header_16k", big, false, 401},
		{"unicode", "Bearer mg-alpha-kéy-1", false, 401},
		{"nul_after_key", "Bearer " + keyAlpha1 + "\x00", true, 400},
		{"tab_inside_key", "Bearer mg-alpha\tkey-1", true, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.sim.Reset()
			var code int
			var body []byte
			if tt.raw {
				code, body = rawHTTP(t, env, "POST", "/v1/responses", "Authorization: "+tt.auth, respBody)
			} else {
				req, _ := newPost(env.front.URL+"/v1/responses", respBody)
				if tt.auth != "" {
					req.Header["Authorization"] = []string{tt.auth}
				}
				resp, err := env.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			}
			if code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
			if code == 401 {
				assertOpenAIError(t, body)
			}
			if n := len(env.sim.Requests()); n != 0 {
				t.Errorf("platform saw %d requests", n)
			}
		})
	}
}

// Path tricks reach no route: 4xx, nothing upstream.
func TestHostilePaths(t *testing.T) {
	env := newResEnv(t, envOptions{})
	paths := []string{
		"/v1/responses/",
		"/v1//responses",
		"//v1/responses",
		"/v1/./responses",
		"/v1/../v1/responses",
		"/v1/chat/../responses",
		"/V1/responses",
		"/v1/Responses",
		"/v1/responses;x=1",
		"/v1/responses%2F",
		"/v1/responses%00",
		"/v1/responses/..%2F..%2Fadmin%2Fusage",
		"/v1/responses\\..\\models",
		"/admin/usage",
		"/v1/" + strings.Repeat("a", 10<<10),
	}
	for _, p := range paths {
		t.Run(url.PathEscape(p)[:min(len(url.PathEscape(p)), 40)], func(t *testing.T) {
			env.sim.Reset()
			code, body := rawHTTP(t, env, "POST", p, "Authorization: Bearer "+keyAlpha1, respBody)
			if code < 400 || code >= 500 {
				t.Fatalf("status %d, want 4xx: %s", code, body)
			}
			if code != http.StatusBadRequest { // 400s here come from net/http itself
				assertOpenAIError(t, body)
			}
			if n := len(env.sim.Requests()); n != 0 {
				t.Errorf("platform saw %d requests", n)
			}
		})
	}
}

// rawHTTP writes one HTTP/1.1 request byte for byte and reads the answer.
func rawHTTP(t testing.TB, env *resEnv, method, path, header, body string) (int, []byte) {
	t.Helper()
	msg := method + " " + path + " HTTP/1.1\r\nHost: modelgate\r\nContent-Type: application/json\r\n" +
		header + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body
	status, b, err := apitest.RawHTTP(t, env.front.Listener.Addr().String(), 10*time.Second, msg)
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

// Nothing the client sends can choose the upstream host, path, credential or extra headers:
// the platform sees modelgate's own request, built from an allow-list.
func TestHeaderHygieneAndSteering(t *testing.T) {
	var mu sync.Mutex
	var dialed []string
	env := newResEnv(t, envOptions{wrapDial: func(next dialFunc) dialFunc {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, addr)
			mu.Unlock()
			return next(ctx, network, addr)
		}
	}})
	steer := `"api_base":"http://evil.example","api_base":"http://evil2.example","base_url":"http://evil.example","baseURL":"http://evil.example",` +
		`"api_key":"sk-evil","extra_headers":{"Authorization":"Bearer sk-evil"},"organization":"org-evil","api_version":"1",` +
		`"Api_Key":"sk-evil","apiKey":"sk-evil","API-BASE":"http://evil.example","\u0061pi_key":"sk-evil","upstreamURL":"http://evil.example"`
	bodies := map[string]string{
		"responses":        `{"model":"sim-chat","input":"hi",` + steer + `}`,
		"responses_stream": `{"model":"sim-chat","input":"hi","stream":true,` + steer + `}`,
		"chat":             `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],` + steer + `}`,
		"chat_stream":      `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"stream":true,` + steer + `}`,
	}
	hostile := []string{
		"Connection", "Authorization, X-Team, Keep-Alive",
		"Keep-Alive", "timeout=5",
		"X-Team", "beta",
		"X-Forwarded-For", "10.0.0.1",
		"X-Forwarded-Host", "evil.example",
		"X-Forwarded-Proto", "https",
		"Forwarded", "for=10.0.0.1;host=evil.example",
		"Proxy-Authorization", "Basic ZXZpbDpldmls",
		"X-Api-Key", "sk-evil",
		"Api-Key", "sk-evil",
		"OpenAI-Organization", "org-evil",
		"Cookie", "session=evil",
		"Te", "trailers",
		"X-Upstream-Url", "http://evil.example",
		"X-Request-Id", "../../etc/passwd\r",
	}
	allowed := map[string]bool{"Authorization": true, "User-Agent": true, "Content-Type": true, "Accept": true,
		"X-Request-Id": true, "Content-Length": true, "Accept-Encoding": true}
	simAddr := env.simSrv.Listener.Addr().String()
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			env.sim.Reset()
			req, _ := newPost(env.front.URL+pathFor(name), body)
			req.Header.Set("Authorization", "Bearer "+keyAlpha1)
			for i := 0; i+1 < len(hostile); i += 2 {
				req.Header[hostile[i]] = []string{strings.TrimSuffix(hostile[i+1], "\r")}
			}
			req.Host = "evil.example"
			resp, err := env.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			reqs := env.sim.Requests()
			if len(reqs) != 1 {
				t.Fatalf("platform saw %d requests, want 1", len(reqs))
			}
			up := reqs[0]
			if up.Path != "/v1/responses" || up.RawQuery != "" {
				t.Errorf("upstream path %q?%q", up.Path, up.RawQuery)
			}
			if v := up.Header.Values("Authorization"); len(v) != 1 || v[0] != "Bearer "+env.canary {
				t.Errorf("upstream credential is not exactly modelgate's")
			}
			for h := range up.Header {
				if !allowed[h] {
					t.Errorf("header %s reached the platform", h)
				}
			}
			if id := up.Header.Get("X-Request-Id"); strings.ContainsAny(id, "./\r\n") {
				t.Errorf("hostile request id reached the platform: %q", id)
			}
			var sent map[string]json.RawMessage
			if err := json.Unmarshal(up.Body, &sent); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"api_base", "base_url", "baseURL", "api_key", "extra_headers", "organization", "api_version"} {
				if _, ok := sent[f]; ok {
					t.Errorf("body field %s reached the platform", f)
				}
			}
			if strings.Contains(string(up.Body), "evil") {
				t.Errorf("client steering text reached the platform: %s", up.Body)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, a := range dialed {
				if a != simAddr {
					t.Errorf("modelgate dialled %s, not the configured platform", a)
				}
			}
		})
	}
}

func pathFor(name string) string {
	if strings.HasPrefix(name, "chat") {
		return "/v1/chat/completions"
	}
	return "/v1/responses"
}

// FuzzResponsesForward: whatever the upstream streams, the client gets a well-formed event
// stream that ends with exactly one terminal or error event, and every event it gets is one
// the upstream sent, byte for byte.
func FuzzResponsesForward(f *testing.F) {
	for _, evs := range [][]string{
		streamEventsRaw(),
		streamEventsRaw()[:3],
		append(streamEventsRaw()[:3], "data: {not json\n\n"),
		append(streamEventsRaw()[:2], "\x00garbage\n\n"),
		{"event: error\ndata: {\"type\":\"error\",\"message\":\"x\"}\n\n"},
		{": ping\r\n\r\n", "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\r\n\r\n"},
	} {
		f.Add([]byte(strings.Join(evs, "")))
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{}
	st := &state{cfg: &config.Config{}}
	f.Fuzz(func(t *testing.T, in []byte) {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
		resp := &http.Response{Body: io.NopCloser(bytes.NewReader(in))}
		_, cancel := context.WithCancel(context.Background())
		defer cancel()
		relayOpened(s, c, st, resp, ratelimit.Usage{InputTokens: 1}, cancel)
		out := w.Body.Bytes()
		er := relay.NewEventReader(bytes.NewReader(out), relay.MaxEventSize)
		ends := 0
		var forwarded []byte
		for {
			ev, err := er.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("client stream is not well formed: %v: %q", err, out)
				}
				break
			}
			if ev.Malformed || (ev.Data != nil && !jsonValid(ev.Data)) {
				t.Fatalf("client got a malformed event %q", ev.Raw)
			}
			if ends > 0 {
				t.Fatalf("event after the end: %q", ev.Raw)
			}
			typ := ev.Type
			if typ == "" {
				typ = jsonType(ev.Data)
			}
			switch typ {
			case "response.completed", "response.incomplete", "response.failed", "error":
				ends++
			}
			if !bytes.HasPrefix(ev.Raw, []byte("event: error\ndata: {\"type\":\"error\",\"code\":\"")) {
				forwarded = append(forwarded, ev.Raw...)
			}
		}
		if ends != 1 {
			t.Fatalf("%d terminal events in %q", ends, out)
		}
		if !bytes.HasPrefix(in, forwarded) {
			t.Fatalf("forwarded bytes are not the upstream's")
		}
	})
}

func streamEventsRaw() []string {
	var out []string
	for _, ev := range streamEvents(0) {
		out = append(out, "event: "+ev.Type+"\ndata: "+ev.Data+"\n\n")
	}
	return out
}

func jsonValid(b []byte) bool { return gjson.ValidBytes(b) }

func jsonType(b []byte) string { return gjson.GetBytes(b, "type").Str }

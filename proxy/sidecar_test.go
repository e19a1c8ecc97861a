package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/sidecar"
	"modelgate/testclock"
)

// passthroughYAML has no team keys: callers bring their own platform keys.
const passthroughYAML = `
listen: 127.0.0.1:0
upstream:
  gateway_url: ${SIM_URL}
  base_url: ${SIM_URL}
`

// envelope is the platform's answer shape, with data kept raw.
type envelope struct {
	Code *int            `json:"code"`
	Msg  *string         `json:"msg"`
	Data json.RawMessage `json:"data"`
}

// assertEnvelope checks body is {"code","msg",...} and returns it.
func assertEnvelope(t *testing.T, body []byte) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil || e.Code == nil || e.Msg == nil {
		t.Fatalf("not an envelope: %s", body)
	}
	return e
}

// sidecarRequests returns what the simulated platform saw under /api/open/v2.
func sidecarRequests(env *testEnv) []platformsim.Request {
	var out []platformsim.Request
	for _, r := range env.sim.Requests() {
		if strings.HasPrefix(r.Path, "/api/open/v2/") {
			out = append(out, r)
		}
	}
	return out
}

func TestSidecarModelRunInfo(t *testing.T) {
	env := newTestEnv(t, "", nil)
	status, _, body := env.do(t, "GET", "/api/open/v2/model-runs/info?run_id=run_000001", keyAlpha1, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	e := assertEnvelope(t, body)
	// Money fields stay decimal strings with their 8 fraction digits.
	if *e.Code != 0 || !bytes.Contains(e.Data, []byte(`"final_amount":"0.42000000"`)) {
		t.Fatalf("unexpected answer: %s", body)
	}
	reqs := sidecarRequests(env)
	if len(reqs) != 1 {
		t.Fatalf("platform saw %d requests, want 1", len(reqs))
	}
	up := reqs[0]
	if up.Method != "GET" || up.Path != modelRunInfoPath || up.RawQuery != "run_id=run_000001" {
		t.Errorf("upstream %s %s?%s", up.Method, up.Path, up.RawQuery)
	}
	if up.Header.Get("Authorization") != "Bearer "+env.canary {
		t.Errorf("upstream did not get the team's platform key")
	}
}

func TestSidecarModelRunList(t *testing.T) {
	env := newTestEnv(t, "", nil)
	cases := []struct {
		name, query, upstream string
	}{
		{"no_params", "", ""},
		{"all_params", "?page_size=100&status=completed&page=3", "page=3&page_size=100&status=completed"},
		{"status_only", "?status=cancelled", "status=cancelled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(sidecarRequests(env))
			status, _, body := env.do(t, "GET", "/api/open/v2/model-runs/list"+tc.query, keyAlpha1, nil)
			if status != http.StatusOK || *assertEnvelope(t, body).Code != 0 {
				t.Fatalf("status %d: %s", status, body)
			}
			reqs := sidecarRequests(env)[before:]
			if len(reqs) != 1 || reqs[0].Path != modelRunListPath || reqs[0].RawQuery != tc.upstream {
				t.Fatalf("upstream requests %+v, want one with query %q", reqs, tc.upstream)
			}
		})
	}
}

// TestSidecarMoneyFieldsRelayedVerbatim shows the envelope reaches the client byte for byte:
// decimal strings keep their 8 fraction digits and numbers their exact spelling.
func TestSidecarMoneyFieldsRelayedVerbatim(t *testing.T) {
	env := newTestEnv(t, "", nil)
	cases := []struct {
		name, path, upstream string
		body                 string
	}{
		{"model_run", "/api/open/v2/model-runs/info?run_id=run_money", modelRunInfoPath,
			`{"code":0,"msg":"ok","data":{"run_id":"run_money","frozen_amount":"0.10000000","final_amount":"0.12345678","released_amount":"0.00000000","extra":{"n":1e2}}}`},
		{"balance", "/api/open/v2/balance/info", balancePath,
			`{"code":0, "msg":"success","data":{"balance":12345678901234567890.123456789,"card_balance":0.10}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env.sim.Enqueue(tc.upstream, platformsim.Reply{Status: 200, Body: []byte(tc.body)})
			status, _, body := env.do(t, "GET", tc.path, keyAlpha1, nil)
			if status != http.StatusOK || string(body) != tc.body {
				t.Fatalf("status %d, body\n%s\nwant\n%s", status, body, tc.body)
			}
		})
	}
}

// TestSidecarPlatformErrors covers the envelope codes, the alternative error shape and
// answers that are neither. Run ids run_err_m1, run_err_m2 and run_alt are the simulator's
// own error cases; the rest are scripted.
func TestSidecarPlatformErrors(t *testing.T) {
	// No retries: a 429 with Retry-After would otherwise be waited out and tried again.
	env := newTestEnv(t, "", func(c *config.Config) {
		zero := 0
		c.Upstream.MaxRetries = &zero
	})
	cases := []struct {
		name       string
		runID      string
		reply      *platformsim.Reply // nil: the simulator's own answer for runID
		wantStatus int
		wantCode   int
		wantMsg    string
		wantData   string // exact data when set
		wantRetry  string
	}{
		{"code_1_unknown_run", "run_missing", nil, 200, 1, "task not found", "", ""},
		{"code_minus_1", "run_err_m1", nil, 200, -1, "query failed", "", ""},
		{"code_minus_2", "run_err_m2", nil, 200, -2, "system exception", "", ""},
		{"alternative_shape", "run_alt", nil, 400, 1, "invalid run_id",
			`{"details":null,"error":"invalid_parameter","field":"run_id"}`, ""},
		{"alternative_shape_string_code", "run_x", &platformsim.Reply{Status: 400, Body: []byte(`{"code":"E_PARAM","message":"bad page","data":{"error":"invalid","details":{"max":100},"field":"page_size"}}`)},
			400, -1, "bad page", `{"error":"invalid","details":{"max":100},"field":"page_size"}`, ""},
		{"rate_limited", "run_x", &platformsim.Reply{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: []byte(`{"code":-1,"msg":"too many requests"}`)},
			429, -1, "too many requests", "", "7"},
		{"server_error_envelope", "run_x", &platformsim.Reply{Status: 500, Body: []byte(`{"code":-2,"msg":"system exception"}`)},
			500, -2, "system exception", "", ""},
		{"html_500", "run_x", &platformsim.Reply{Status: 500, Body: []byte(`<html>boom at 10.0.0.7</html>`)},
			502, -2, "", "", ""},
		{"html_404", "run_x", &platformsim.Reply{Status: 404, Body: []byte(`<html>nope</html>`)},
			404, 1, "", "", ""},
		{"success_not_json", "run_x", &platformsim.Reply{Status: 200, Body: []byte(`not json`)},
			502, -2, "", "", ""},
		{"oversized_answer", "run_x", &platformsim.Reply{Status: 200, Body: []byte(`{"code":0,"msg":"ok","data":"` + strings.Repeat("x", sidecar.MaxAnswer) + `"}`)},
			502, -2, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.reply != nil {
				env.sim.Enqueue(modelRunInfoPath, *tc.reply)
			}
			status, hdr, body := env.do(t, "GET", "/api/open/v2/model-runs/info?run_id="+tc.runID, keyAlpha1, nil)
			e := assertEnvelope(t, body)
			if status != tc.wantStatus || *e.Code != tc.wantCode {
				t.Errorf("status %d code %d, want %d and %d: %.300s", status, *e.Code, tc.wantStatus, tc.wantCode, body)
			}
			if tc.wantMsg != "" && *e.Msg != tc.wantMsg {
				t.Errorf("msg %q, want %q", *e.Msg, tc.wantMsg)
			}
			if tc.wantData != "" && string(e.Data) != tc.wantData {
				t.Errorf("data %s, want %s", e.Data, tc.wantData)
			}
			if bytes.Contains(body, []byte(`"message"`)) {
				t.Errorf("alternative shape relayed unconverted: %s", body)
			}
			if hdr.Get("Retry-After") != tc.wantRetry {
				t.Errorf("Retry-After %q, want %q", hdr.Get("Retry-After"), tc.wantRetry)
			}
			if bytes.Contains(body, []byte("10.0.0.7")) || bytes.Contains(body, []byte("<html>")) {
				t.Errorf("upstream error text relayed: %s", body)
			}
		})
	}
}

func TestSidecarAuthFailures(t *testing.T) {
	env := newTestEnv(t, "", nil)
	cases := []struct{ name, key string }{
		{"missing", ""},
		{"unknown", "mg-not-a-key"},
		{"platform_key_itself", env.canary},
		{"admin_key", keyAdmin},
	}
	for _, tc := range cases {
		for _, path := range []string{"/api/open/v2/balance/info", "/api/open/v2/model-runs/list", "/api/open/v2/assets/asset_1"} {
			t.Run(tc.name+path, func(t *testing.T) {
				status, _, body := env.do(t, "GET", path, tc.key, nil)
				if status != http.StatusUnauthorized || *assertEnvelope(t, body).Code != 2 {
					t.Errorf("status %d: %s", status, body)
				}
			})
		}
	}
	status, _, body := env.do(t, "POST", "/api/open/v2/assets", "", []byte("x"), "Content-Type", "multipart/form-data; boundary=b")
	if status != http.StatusUnauthorized || *assertEnvelope(t, body).Code != 2 {
		t.Errorf("upload without key: status %d: %s", status, body)
	}
	if n := len(sidecarRequests(env)); n != 0 {
		t.Errorf("platform saw %d requests for unauthenticated calls", n)
	}
}

// TestSidecarPlatformRejectsOurKey: in keys mode a refusal of modelgate's credential is
// modelgate's problem, reported as a gateway error that says nothing about the key.
func TestSidecarPlatformRejectsOurKey(t *testing.T) {
	env := newTestEnv(t, "", nil)
	cases := []struct {
		name  string
		reply platformsim.Reply
	}{
		{"http_401", platformsim.Reply{Status: 401, Body: []byte(`{"code":2,"msg":"invalid key sk-CANARY"}`)}},
		{"http_403", platformsim.Reply{Status: 403, Body: []byte(`{"code":1,"msg":"forbidden"}`)}},
		{"code_2_in_200", platformsim.Reply{Status: 200, Body: []byte(`{"code":2,"msg":"not logged in"}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env.sim.Enqueue(balancePath, tc.reply)
			status, _, body := env.do(t, "GET", "/api/open/v2/balance/info", keyAlpha1, nil)
			e := assertEnvelope(t, body)
			if status != http.StatusBadGateway || *e.Code != -2 {
				t.Fatalf("status %d: %s", status, body)
			}
			if strings.Contains(string(body), "CANARY") || strings.Contains(string(body), "not logged in") {
				t.Errorf("platform's answer leaked: %s", body)
			}
		})
	}
}

// TestSidecarPassthroughAuth: with the caller's own key, the platform's 401 is the caller's.
func TestSidecarPassthroughAuth(t *testing.T) {
	env := newTestEnv(t, passthroughYAML, nil)
	status, _, body := env.do(t, "GET", "/api/open/v2/balance/info", "sk-not-known-to-the-platform", nil)
	if status != http.StatusUnauthorized || *assertEnvelope(t, body).Code != 2 {
		t.Fatalf("status %d: %s", status, body)
	}
	status, _, body = env.do(t, "GET", "/api/open/v2/balance/info", env.canary, nil)
	if status != http.StatusOK || *assertEnvelope(t, body).Code != 0 {
		t.Fatalf("own valid key: status %d: %s", status, body)
	}
	reqs := sidecarRequests(env)
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer sk-not-known-to-the-platform" {
		t.Fatalf("the caller's key was not forwarded: %+v", reqs)
	}
}

func TestSidecarUpstreamUnreachable(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	env := newTestEnv(t, "", func(c *config.Config) {
		c.Upstream.BaseURL = closedURL
		zero := 0
		c.Upstream.MaxRetries = &zero
	})
	for _, path := range []string{"/api/open/v2/balance/info", "/api/open/v2/model-runs/info?run_id=r1", "/api/open/v2/model-runs/list"} {
		t.Run(strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
			status, _, body := env.do(t, "GET", path, keyAlpha1, nil)
			if status != http.StatusBadGateway || *assertEnvelope(t, body).Code != -2 {
				t.Errorf("status %d: %s", status, body)
			}
			if strings.Contains(string(body), "127.0.0.1") {
				t.Errorf("internal address in the answer: %s", body)
			}
		})
	}
}

// TestSidecarLimitsApply: the sidecar counts against the key's request limit and answers a
// refusal in the envelope shape.
func TestSidecarLimitsApply(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) {
		c.Teams[1].Keys[0].Limits.RequestsPerMinute = 1
	})
	status, _, body := env.do(t, "GET", "/api/open/v2/model-runs/list", keyBeta, nil)
	if status != http.StatusOK {
		t.Fatalf("first call: %d %s", status, body)
	}
	status, hdr, body := env.do(t, "GET", "/api/open/v2/model-runs/list", keyBeta, nil)
	if status != http.StatusTooManyRequests || *assertEnvelope(t, body).Code != -1 || hdr.Get("Retry-After") == "" {
		t.Fatalf("second call: %d %v %s", status, hdr, body)
	}
	if n := len(sidecarRequests(env)); n != 1 {
		t.Errorf("platform saw %d requests, want 1", n)
	}
}

// allowedUpstream reports whether a recorded platform request is one of the five routes,
// with an id of the strict pattern where there is one.
func allowedUpstream(r platformsim.Request) bool {
	switch {
	case r.Method == "GET" && (r.Path == modelRunInfoPath || r.Path == modelRunListPath || r.Path == balancePath):
		return true
	case r.Method == "POST" && r.Path == assetsPath:
		return r.RawQuery == ""
	case r.Method == "GET" && strings.HasPrefix(r.Path, assetsPath+"/"):
		return sidecar.ValidID(strings.TrimPrefix(r.Path, assetsPath+"/")) && r.RawQuery == ""
	}
	return false
}

// pathTricks are requests that must never reach any platform path: each is refused by
// modelgate with 400 or 404 and nothing is sent upstream.
var pathTricks = []struct{ name, method, target string }{
	{"encoded_slashes", "GET", "/api/open/v2/assets/..%2F..%2Finstance%2Flist"},
	{"encoded_dots_and_slashes", "GET", "/api/open/v2/assets/%2e%2e%2f%2e%2e%2finstance%2flist"},
	{"double_encoded", "GET", "/api/open/v2/assets/..%252F..%252Finstance%252Flist"},
	{"encoded_backslashes", "GET", "/api/open/v2/assets/..%5C..%5Cinstance%5Clist"},
	{"raw_backslashes", "GET", `/api/open/v2/assets/..\..\instance\list`},
	{"raw_dot_segments", "GET", "/api/open/v2/assets/../../instance/list"},
	{"dot_dot_id", "GET", "/api/open/v2/assets/.."},
	{"encoded_dot_dot_id", "GET", "/api/open/v2/assets/%2e%2e"},
	{"jsessionid", "GET", "/api/open/v2/assets/asset_1;jsessionid=x"},
	{"nul", "GET", "/api/open/v2/assets/asset_1%00"},
	{"nul_then_traversal", "GET", "/api/open/v2/assets/asset_1%00%2F..%2F..%2Finstance%2Flist"},
	{"encoded_question", "GET", "/api/open/v2/assets/asset_1%3Fx=1"},
	{"encoded_hash", "GET", "/api/open/v2/assets/asset_1%23frag"},
	{"query_on_asset", "GET", "/api/open/v2/assets/asset_1?path=../instance/list"},
	{"ten_kb_id", "GET", "/api/open/v2/assets/" + strings.Repeat("a", 10<<10)},
	{"unicode_id", "GET", "/api/open/v2/assets/%C3%A9"},
	{"other_platform_route", "GET", "/api/open/v2/instance/list"},
	{"prefix_traversal", "GET", "/api/open/v2/%2e%2e/v2/instance/list"},
	{"double_slash", "GET", "//api/open/v2/assets/asset_1"},
	{"assets_encoded_slash", "GET", "/api/open/v2/assets%2F..%2Finstance%2Flist"},
	{"upload_to_subpath", "POST", "/api/open/v2/assets/..%2Finstance%2Flist"},
	{"upload_trailing_slash", "POST", "/api/open/v2/assets/"},
	{"delete_asset", "DELETE", "/api/open/v2/assets/asset_1"},
	{"post_run_info", "POST", "/api/open/v2/model-runs/info?run_id=r1"},
	{"run_info_subpath", "GET", "/api/open/v2/model-runs/info/../../instance/list?run_id=r1"},
	{"run_info_encoded_suffix", "GET", "/api/open/v2/model-runs/info%2F..%2F..%2Finstance%2Flist?run_id=r1"},
	{"run_id_traversal", "GET", "/api/open/v2/model-runs/info?run_id=..%2F..%2Finstance%2Flist"},
	{"run_id_double_encoded", "GET", "/api/open/v2/model-runs/info?run_id=..%252F..%252Finstance"},
	{"run_id_backslash", "GET", "/api/open/v2/model-runs/info?run_id=..%5Cinstance"},
	{"run_id_semicolon", "GET", "/api/open/v2/model-runs/info?run_id=r1;x=1"},
	{"run_id_nul", "GET", "/api/open/v2/model-runs/info?run_id=r1%00"},
	{"run_id_ten_kb", "GET", "/api/open/v2/model-runs/info?run_id=" + strings.Repeat("r", 10<<10)},
	{"run_id_repeated", "GET", "/api/open/v2/model-runs/info?run_id=r1&run_id=r2"},
	{"run_id_missing", "GET", "/api/open/v2/model-runs/info"},
	{"run_info_unknown_param", "GET", "/api/open/v2/model-runs/info?run_id=r1&instance_uuid=x"},
	{"list_page_zero", "GET", "/api/open/v2/model-runs/list?page=0"},
	{"list_page_negative", "GET", "/api/open/v2/model-runs/list?page=-1"},
	{"list_page_size_101", "GET", "/api/open/v2/model-runs/list?page_size=101"},
	{"list_page_size_zero", "GET", "/api/open/v2/model-runs/list?page_size=0"},
	{"list_status_bogus", "GET", "/api/open/v2/model-runs/list?status=bogus"},
	{"list_status_repeated", "GET", "/api/open/v2/model-runs/list?status=failed&status=completed"},
	{"list_page_repeated", "GET", "/api/open/v2/model-runs/list?page=1&page=2"},
	{"list_unknown_param", "GET", "/api/open/v2/model-runs/list?order_number=1"},
	{"list_semicolon", "GET", "/api/open/v2/model-runs/list?page=1;page_size=100"},
	{"list_bad_escape", "GET", "/api/open/v2/model-runs/list?page=%zz"},
	{"balance_param", "GET", "/api/open/v2/balance/info?card=1"},
	{"balance_subpath", "GET", "/api/open/v2/balance/info/../../instance/list"},
	{"balance_encoded_suffix", "GET", "/api/open/v2/balance/info%2F..%2F..%2Finstance%2Flist"},
}

// dialRaw opens a bare TCP connection to addr that gives up after d, for the tests that
// write requests byte by byte; the caller closes it.
func dialRaw(t *testing.T, addr string, d time.Duration) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(d))
	return conn
}

// rawRequest writes target as-is on the request line, bypassing any client-side cleaning.
func rawRequest(t *testing.T, addr, method, target, key string) (int, []byte) {
	t.Helper()
	conn := dialRaw(t, addr, 10*time.Second)
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", method, target, key)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading answer: %v", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func assertTrickRefused(t *testing.T, status int, body []byte) {
	t.Helper()
	if status != http.StatusBadRequest && status != http.StatusNotFound {
		t.Errorf("status %d, want 400 or 404: %.200s", status, body)
	}
	// Requests the HTTP server itself rejects never reach modelgate and carry no JSON.
	if status == http.StatusNotFound || bytes.HasPrefix(body, []byte("{")) {
		if !json.Valid(body) {
			t.Errorf("answer is not JSON: %.200s", body)
		}
	}
}

// TestSidecarPathTricks runs the battery against the real listener (gin UseRawPath false, the
// server default), in both auth modes. The platform must record nothing at all.
func TestSidecarPathTricks(t *testing.T) {
	modes := []struct{ name, yaml, key string }{
		{"keys", "", keyAlpha1},
		{"passthrough", passthroughYAML, ""},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			env := newTestEnv(t, m.yaml, nil)
			key := m.key
			if key == "" {
				key = env.canary
			}
			addr := strings.TrimPrefix(env.front.URL, "http://")
			for _, tc := range pathTricks {
				t.Run(tc.name, func(t *testing.T) {
					status, body := rawRequest(t, addr, tc.method, tc.target, key)
					assertTrickRefused(t, status, body)
				})
			}
			if reqs := env.sim.Requests(); len(reqs) != 0 {
				for _, r := range reqs {
					t.Errorf("platform received %s %s?%.100s", r.Method, r.Path, r.RawQuery)
				}
			}
		})
	}
}

// TestSidecarPathTricksRawPath repeats the battery with gin routing on the escaped path, so
// an encoded slash does reach the :asset_id parameter; the id check must still hold.
func TestSidecarPathTricksRawPath(t *testing.T) {
	env := newTestEnv(t, passthroughYAML, nil)
	env.server.engine.UseRawPath = true // before any request is served by this goroutine
	for _, tc := range pathTricks {
		if strings.ContainsAny(tc.target, `\`) {
			continue // not a valid request-target for httptest.NewRequest
		}
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.target, nil)
			req.Header.Set("Authorization", "Bearer "+env.canary)
			rec := httptest.NewRecorder()
			env.server.Handler().ServeHTTP(rec, req)
			assertTrickRefused(t, rec.Code, rec.Body.Bytes())
		})
	}
	if reqs := env.sim.Requests(); len(reqs) != 0 {
		for _, r := range reqs {
			t.Errorf("platform received %s %s?%.100s", r.Method, r.Path, r.RawQuery)
		}
	}
}

// TestSidecarEncodedButValidPaths: encodings that decode to an allowed route are served, and
// the platform sees exactly the canonical path.
func TestSidecarEncodedButValidPaths(t *testing.T) {
	env := newTestEnv(t, passthroughYAML, nil)
	addr := strings.TrimPrefix(env.front.URL, "http://")
	targets := []string{
		"/api/open/v2/model-runs/%69nfo?run_id=run_000002",
		"/api/open/v2/%62alance/info",
		"/api/open/v2/assets/%61sset_1",
		"/api/open/v2/assets/asset_2?",
	}
	for _, target := range targets {
		rawRequest(t, addr, "GET", target, env.canary)
	}
	reqs := env.sim.Requests()
	if len(reqs) != len(targets) {
		t.Fatalf("platform saw %d requests, want %d", len(reqs), len(targets))
	}
	want := []string{modelRunInfoPath + "?run_id=run_000002", balancePath + "?", assetsPath + "/asset_1?", assetsPath + "/asset_2?"}
	for i, r := range reqs {
		if got := r.Path + "?" + r.RawQuery; got != want[i] || !allowedUpstream(r) {
			t.Errorf("upstream %s, want %s", got, want[i])
		}
	}
}

// fakeClock is a settable clock for the balance cache and the key pools.
type fakeClock = testclock.Clock

func newFakeClock() *fakeClock { return testclock.New() }

// newClockedEnv is a test env whose server reads clk.
func newClockedEnv(t *testing.T, clk *fakeClock) *testEnv {
	t.Helper()
	return startEnv(t, envOptions{now: clk.Now})
}

func balanceCalls(env *testEnv) int {
	n := 0
	for _, r := range env.sim.Requests() {
		if r.Path == balancePath {
			n++
		}
	}
	return n
}

func TestSidecarBalanceCache(t *testing.T) {
	clk := newFakeClock()
	env := newClockedEnv(t, clk)
	ttl := env.cfg.Sidecar.BalanceCacheTTL
	if ttl != 5*time.Second {
		t.Fatalf("default balance TTL %s, want 5s", ttl)
	}
	poll := func(key string) []byte {
		t.Helper()
		status, _, body := env.do(t, "GET", "/api/open/v2/balance/info", key, nil)
		if status != http.StatusOK || *assertEnvelope(t, body).Code != 0 {
			t.Fatalf("status %d: %s", status, body)
		}
		return body
	}
	first := poll(keyAlpha1)
	// Both teams use the same platform key here: one account, one cache entry.
	for i := range 20 {
		key := []string{keyAlpha1, keyAlpha2, keyBeta}[i%3]
		if b := poll(key); !bytes.Equal(b, first) {
			t.Fatalf("cached answer differs: %s", b)
		}
	}
	if n := balanceCalls(env); n != 1 {
		t.Fatalf("21 polls within the TTL made %d upstream calls, want 1", n)
	}
	clk.Advance(ttl - time.Millisecond)
	poll(keyAlpha1)
	if n := balanceCalls(env); n != 1 {
		t.Fatalf("poll just inside the TTL made %d upstream calls, want 1", n)
	}
	clk.Advance(time.Millisecond)
	poll(keyAlpha1)
	if n := balanceCalls(env); n != 2 {
		t.Fatalf("poll after the TTL made %d upstream calls in total, want 2", n)
	}
}

// TestSidecarBalanceConcurrentPolls: a burst of concurrent polls on a cold cache makes one call.
func TestSidecarBalanceConcurrentPolls(t *testing.T) {
	noLeaks(t)
	env := newClockedEnv(t, newFakeClock())
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", env.front.URL+"/api/open/v2/balance/info", nil)
			req.Header.Set("Authorization", "Bearer "+keyAlpha1)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if n := balanceCalls(env); n != 1 {
		t.Fatalf("16 concurrent polls made %d upstream calls, want 1", n)
	}
}

// TestSidecarBalanceCacheScope: failures are not cached, and different platform keys never
// share an entry.
func TestSidecarBalanceCacheScope(t *testing.T) {
	clk := newFakeClock()
	t.Run("failure_not_cached", func(t *testing.T) {
		env := newClockedEnv(t, clk)
		env.sim.Enqueue(balancePath, platformsim.Reply{Status: 200, Body: []byte(`{"code":-2,"msg":"system exception"}`)})
		status, _, body := env.do(t, "GET", "/api/open/v2/balance/info", keyAlpha1, nil)
		if *assertEnvelope(t, body).Code != -2 {
			t.Fatalf("status %d: %s", status, body)
		}
		status, _, body = env.do(t, "GET", "/api/open/v2/balance/info", keyAlpha1, nil)
		if status != http.StatusOK || *assertEnvelope(t, body).Code != 0 || balanceCalls(env) != 2 {
			t.Fatalf("failure was cached: %d %s, %d calls", status, body, balanceCalls(env))
		}
	})
	t.Run("per_platform_key", func(t *testing.T) {
		env := startEnv(t, envOptions{yaml: passthroughYAML, now: clk.Now})
		env.do(t, "GET", "/api/open/v2/balance/info", env.canary, nil)
		status, _, body := env.do(t, "GET", "/api/open/v2/balance/info", "sk-someone-else", nil)
		if status != http.StatusUnauthorized {
			t.Fatalf("another key got the cached balance: %d %s", status, body)
		}
		if balanceCalls(env) != 2 {
			t.Fatalf("%d upstream calls, want 2", balanceCalls(env))
		}
	})
	t.Run("ttl_zero_disables", func(t *testing.T) {
		env := startEnv(t, envOptions{now: clk.Now, mutate: func(c *config.Config) { c.Sidecar.BalanceCacheTTL = 0 }})
		for range 3 {
			env.do(t, "GET", "/api/open/v2/balance/info", keyAlpha1, nil)
		}
		if balanceCalls(env) != 3 {
			t.Fatalf("%d upstream calls, want 3", balanceCalls(env))
		}
	})
}

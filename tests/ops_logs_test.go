package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"modelgate/apitest"
)

// TestLogsNeverCarrySecrets runs the real binary at debug level through every kind of request,
// failures included, in both log formats and both auth modes, and then searches everything the
// process printed for the keys, prompts and bodies it was given.
func TestLogsNeverCarrySecrets(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run("keys_"+format, func(t *testing.T) { logsKeysMode(t, format) })
	}
	t.Run("passthrough", logsPassthroughMode)
	t.Run("upstream_down", logsUpstreamDown)
}

// secrets are the values that must never reach a log.
type secrets map[string]string

func (s secrets) check(t *testing.T, g *gateway) {
	t.Helper()
	out := g.Output.String()
	for what, v := range s {
		if strings.Contains(out, v) {
			t.Errorf("the %s appeared in modelgate's output", what)
		}
	}
}

// requestLines counts the access-log lines, so a test that logged nothing cannot pass.
func requestLines(t *testing.T, g *gateway, format string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(g.Output.String(), "\n") {
		switch format {
		case "json":
			var rec map[string]any
			if line == "" {
				continue
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("--log-format json printed a non-JSON line: %.200q", line)
			}
			if rec["msg"] == "request" {
				n++
			}
		default:
			if strings.Contains(line, "msg=request ") {
				n++
			}
		}
	}
	return n
}

func logsKeysMode(t *testing.T, format string) {
	p := startPlatform(t)
	cfg := keysConfig(p, "")
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p), Args: []string{"--log-level", "debug", "--log-format", format}})
	sec := secrets{
		"platform key": p.Key, "alpha key": alphaKey, "beta key": betaKey, "admin key": adminKey,
		"unknown key": "mg-bogus-" + canary(t)[10:],
		"prompt":      "PROMPT-" + canary(t)[10:],
		"body":        "BODY-" + canary(t)[10:],
		"upload":      "UPLOAD-" + canary(t)[10:],
	}
	prompt := sec["prompt"]
	chat, responses := g.URL+"/v1/chat/completions", g.URL+"/v1/responses"
	steps := []struct {
		name         string
		method, url  string
		key, body    string
		wantStatuses []int
	}{
		{"chat", "POST", chat, alphaKey, chatBody("gpt-4o-mini", prompt, false), []int{200}},
		{"chat_stream", "POST", chat, alphaKey, chatBody("sim-chat", prompt, true), []int{200}},
		{"responses", "POST", responses, alphaKey, responsesBody("sim-chat", prompt, false), []int{200}},
		{"responses_stream", "POST", responses, betaKey, responsesBody("sim-chat", prompt, true), []int{200}},
		{"upstream_failed", "POST", chat, alphaKey, chatBody("sim-failed", prompt, false), []int{500, 502}},
		{"upstream_failed_stream", "POST", responses, alphaKey, responsesBody("sim-failed", prompt, true), []int{200, 500, 502}},
		{"model_not_allowed", "POST", chat, betaKey, chatBody("sim-tools", prompt, false), []int{404}},
		{"unknown_key", "POST", chat, sec["unknown key"], chatBody("sim-chat", prompt, false), []int{401}},
		{"malformed_json", "POST", chat, alphaKey, `{"model":"sim-chat","messages":[{"role":"user","content":"` + sec["body"], []int{400}},
		{"wrong_type", "POST", chat, alphaKey, `{"model":"sim-chat","messages":"` + sec["body"] + `"}`, []int{400}},
		{"admin_usage", "GET", g.URL + "/admin/usage", adminKey, "", []int{200}},
		{"admin_with_team_key", "GET", g.URL + "/admin/usage", alphaKey, "", []int{403}},
		{"admin_with_platform_key", "GET", g.URL + "/admin/usage", p.Key, "", []int{401}},
		{"platform_key_on_v1", "POST", chat, p.Key, chatBody("sim-chat", prompt, false), []int{401}},
		{"balance", "GET", g.URL + "/api/open/v2/balance/info", alphaKey, "", []int{200}},
		{"model_runs", "GET", g.URL + "/api/open/v2/model-runs/list", alphaKey, "", []int{200}},
		{"models", "GET", g.URL + "/v1/models", alphaKey, "", []int{200}},
	}
	for _, s := range steps {
		code, body := opsMust(t, s.method, s.url, s.key, s.body)
		if !containsInt(s.wantStatuses, code) {
			t.Errorf("%s: status %d, want one of %v: %.300s", s.name, code, s.wantStatuses, body)
		}
	}
	uploadAsset(t, g, alphaKey, sec["upload"])

	if n := requestLines(t, g, format); n < len(steps)+1 {
		t.Errorf("%d access-log lines for %d requests", n, len(steps)+1)
	}
	sec.check(t, g)
}

// uploadAsset sends a multipart upload whose file holds content, then fetches the asset.
func uploadAsset(t *testing.T, g *gateway, key, content string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fw, content)
	mw.WriteField("media_type", "file")
	mw.Close()
	status, _, b := apitest.DoContext(t, ctx(t), http.MethodPost, g.URL+"/api/open/v2/assets", key, &buf,
		"Content-Type", mw.FormDataContentType())
	var env struct {
		Code int `json:"code"`
		Data struct {
			AssetID string `json:"asset_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil || status != 200 {
		t.Fatalf("upload: status %d, %v: %.300s", status, err, b)
	}
	if env.Data.AssetID != "" {
		opsMust(t, "GET", g.URL+"/api/open/v2/assets/"+env.Data.AssetID, key, "")
	}
}

// In passthrough mode the caller's own token is a platform key: it must not be logged either.
func logsPassthroughMode(t *testing.T) {
	p := startPlatform(t)
	cfg := "upstream:\n  gateway_url: " + p.URL + "\n  base_url: " + p.URL + "\nratelimit:\n  data_path: data\n"
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Args: []string{"--log-level", "debug", "--log-format", "json"}})
	sec := secrets{"platform key": p.Key, "wrong platform key": canary(t), "prompt": "PROMPT-" + canary(t)[10:]}
	chat := g.URL + "/v1/chat/completions"
	for _, s := range []struct {
		name string
		key  string
		want int
	}{
		{"good_token", p.Key, 200},
		{"wrong_token", sec["wrong platform key"], 401},
	} {
		if code, body := opsMust(t, "POST", chat, s.key, chatBody("sim-chat", sec["prompt"], false)); code != s.want {
			t.Errorf("%s: status %d, want %d: %.300s", s.name, code, s.want, body)
		}
	}
	opsMust(t, "POST", chat, p.Key, chatBody("sim-chat", sec["prompt"], true))
	opsMust(t, "GET", g.URL+"/api/open/v2/balance/info", p.Key, "")
	if n := requestLines(t, g, "json"); n < 4 {
		t.Errorf("%d access-log lines for 4 requests", n)
	}
	if !strings.Contains(g.Output.String(), `"key":"passthrough"`) {
		t.Error("passthrough requests should be logged with key=passthrough")
	}
	sec.check(t, g)
}

// A platform that cannot be reached produces error paths (dial errors, retries) of their own.
func logsUpstreamDown(t *testing.T) {
	p := startPlatform(t)
	dead := &platform{URL: "http://" + freePort(t), Key: p.Key}
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(dead, ""), Env: keysEnv(p), Args: []string{"--log-level", "debug"}})
	sec := secrets{"platform key": p.Key, "alpha key": alphaKey, "prompt": "PROMPT-" + canary(t)[10:]}
	for _, stream := range []bool{false, true} {
		code, body := opsMust(t, "POST", g.URL+"/v1/chat/completions", alphaKey, chatBody("sim-chat", sec["prompt"], stream))
		if code != http.StatusBadGateway && code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout {
			t.Errorf("stream=%v: status %d with the platform down: %.300s", stream, code, body)
		}
	}
	opsMust(t, "GET", g.URL+"/api/open/v2/balance/info", alphaKey, "")
	if !strings.Contains(g.Output.String(), "upstream_error=dial") {
		t.Error("the access log should name the dial failure")
	}
	sec.check(t, g)
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

package admin_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/config"
)

// Hostile bodies on POST /admin/keys: each is a 4xx in the API's (OpenAI) error shape, no
// key is issued, and the server goes on answering.
func TestCreateKeyHostileBodies(t *testing.T) {
	r := startReplica(t, envOptions{})
	deep := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"deep_nesting", `{"team":"alpha","name":"x","limits":` + deep + `}`, 413, "body_too_large"},
		{"deep_within_size", `{"team":"alpha","name":"x","limits":` + strings.Repeat("[", 8000) + `}`, 400, "invalid_json"},
		{"oversized_body", `{"team":"alpha","name":"` + strings.Repeat("x", 20<<10) + `"}`, 413, "body_too_large"},
		{"oversized_name", `{"team":"alpha","name":"` + strings.Repeat("x", 65) + `"}`, 400, "invalid_name"},
		{"oversized_team", `{"team":"` + strings.Repeat("t", 4000) + `","name":"x"}`, 404, "unknown_team"},
		{"duplicate_team", `{"team":"beta","team":"alpha","name":"x"}`, 400, "duplicate_parameter"},
		{"duplicate_name", `{"team":"alpha","name":"a","name":"b"}`, 400, "duplicate_parameter"},
		{"duplicate_limit", `{"team":"alpha","name":"x","limits":{"spend_per_day":1,"spend_per_day":1000}}`, 400, "duplicate_parameter"},
		{"limits_wrong_type", `{"team":"alpha","name":"x","limits":"lots"}`, 400, "invalid_json"},
		{"limit_wrong_type", `{"team":"alpha","name":"x","limits":{"spend_per_day":"1"}}`, 400, "invalid_json"},
		{"expiry_2300", `{"team":"alpha","name":"x","expires_at":"2300-01-01T00:00:00Z"}`, 400, "invalid_expiry"},
		{"expiry_number", `{"team":"alpha","name":"x","expires_at":1e300}`, 400, "invalid_json"},
		{"invalid_utf8_name", "{\"team\":\"alpha\",\"name\":\"a\xff\"}", 400, "invalid_name"},
		{"nul_in_name", `{"team":"alpha","name":"a\u0000"}`, 400, "invalid_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, b := r.do(t, "POST", "/admin/keys", adminKey, tt.body)
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			if status != tt.status || json.Unmarshal(b, &e) != nil || e.Error.Code != tt.code || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%d %.300s, want %d %s", status, b, tt.status, tt.code)
			}
			if len(b) > 1024 {
				t.Errorf("the refusal is %d bytes: it echoes the input", len(b))
			}
		})
	}
	if n := len(r.list(t, "").Keys); n != 2 { // the two config keys
		t.Fatalf("%d keys listed after the hostile bodies", n)
	}
	if got := r.chat(t, alphaKey); got != http.StatusOK {
		t.Fatalf("the server stopped answering: %d", got)
	}
}

// TestCreateKeyStalledBody: the stalled-body row for the admin API. A body that stops
// arriving is a 408 in the API's shape once server.body_read_timeout has passed, no key is
// issued, and the server goes on answering.
func TestCreateKeyStalledBody(t *testing.T) {
	const timeout = 200 * time.Millisecond
	r := startReplica(t, envOptions{mutate: func(c *config.Config) { c.Server.BodyReadTimeout = timeout }})
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := `{"team":"alpha","name":"stalled",`
	fmt.Fprintf(conn, "POST /admin/keys HTTP/1.1\r\nHost: modelgate\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n%s", adminKey, start)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != http.StatusRequestTimeout || json.Unmarshal(b, &e) != nil || e.Error.Code != "request_timeout" || e.Error.Message == "" {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	status, _, list := r.do(t, "GET", "/admin/keys?team=alpha", adminKey, nil)
	if status != 200 || strings.Contains(string(list), `"stalled"`) {
		t.Fatalf("after the stalled body: %d %s", status, list)
	}
}

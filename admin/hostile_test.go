package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
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

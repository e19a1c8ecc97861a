package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/reqlog"
)

// A caller's X-Request-Id is logged as client_request_id, bounded and plain, and never
// becomes modelgate's id: two requests that send the same one get ids of their own, the
// platform sees those, and the log shows both on each line.
func TestClientRequestIDIsNeverModelgates(t *testing.T) {
	env := newTestEnv(t, "", nil)
	long := strings.Repeat("a", 200)
	tests := []struct{ name, sent, logged string }{
		{"plain", "trace-42", "trace-42"},
		{"hostile", "../../etc/passwd\t\"x\" y", ".._.._etc_passwd__x__y"},
		{"long", long, long[:reqlog.MaxClientRequestID]},
		{"non_ascii", "réq", "r__q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.sim.Reset()
			var ours []string
			for range 2 {
				status, hdr, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`), "X-Request-Id", tt.sent)
				if status != http.StatusOK {
					t.Fatalf("%d %s", status, b)
				}
				id := hdr.Get("X-Request-Id")
				if !strings.HasPrefix(id, "req_") || len(id) != len("req_")+32 {
					t.Fatalf("answer's X-Request-Id %q, want modelgate's own req_ id", id)
				}
				ours = append(ours, id)
			}
			if ours[0] == ours[1] {
				t.Fatalf("two requests share the id %s", ours[0])
			}
			var upstream []string
			for _, r := range env.sim.Requests() {
				upstream = append(upstream, r.Header.Get("X-Request-Id"))
			}
			if strings.Join(upstream, ",") != strings.Join(ours, ",") {
				t.Errorf("the platform saw ids %q, want modelgate's %q", upstream, ours)
			}
			for _, id := range ours {
				line := accessLineOf(t, env, id)
				if line["client_request_id"] != tt.logged {
					t.Errorf("line of %s: client_request_id %q, want %q", id, line["client_request_id"], tt.logged)
				}
			}
		})
	}
	// Without the header the line has no such field.
	_, hdr, _ := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`))
	if _, ok := accessLineOf(t, env, hdr.Get("X-Request-Id"))["client_request_id"]; ok {
		t.Error("client_request_id logged for a request that sent none")
	}
}

// accessLineOf is the access-log line of the request with modelgate's id, as JSON fields.
func accessLineOf(t *testing.T, env *testEnv, id string) map[string]any {
	t.Helper()
	var found map[string]any
	waitFor(5*time.Second, func() bool {
		for line := range strings.SplitSeq(env.logs.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "request" && rec["request_id"] == id {
				found = rec
				return true
			}
		}
		return false
	})
	if found == nil {
		t.Fatalf("no request line for %s", id)
	}
	return found
}

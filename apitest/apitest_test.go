package apitest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// echoServer answers every request with its method, path and body, and its Authorization
// header in X-Auth.
func echoServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Auth", r.Header.Get("Authorization"))
		_, _ = w.Write(append([]byte(r.Method+" "+r.URL.Path+" "), b...))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Do sends the request Send is given and hands back status, headers and the whole body.
func TestDoReadsTheWholeAnswer(t *testing.T) {
	srv := echoServer(t)
	status, h, body := Do(t, "POST", srv.URL+"/x", "k1", strings.NewReader("hi"))
	if status != http.StatusOK || h.Get("X-Auth") != "Bearer k1" || string(body) != "POST /x hi" {
		t.Errorf("status %d, X-Auth %q, body %q", status, h.Get("X-Auth"), body)
	}
}

func TestNewRequestHeaders(t *testing.T) {
	// want names every header the test looks at; "" is absent.
	tests := []struct {
		name, key string
		hdr       []string
		want      map[string]string
	}{
		{"bearer_and_json", "k1", nil, map[string]string{"Authorization": "Bearer k1", "Content-Type": "application/json", "X-Test": ""}},
		{"no_key_no_auth", "", nil, map[string]string{"Authorization": "", "Content-Type": "application/json"}},
		{"extra_header", "k1", []string{"X-Test", "v"}, map[string]string{"Authorization": "Bearer k1", "X-Test": "v"}},
		{"extra_overrides_default", "", []string{"Content-Type", "text/plain"}, map[string]string{"Content-Type": "text/plain"}},
		{"odd_pair_ignored", "", []string{"X-Test"}, map[string]string{"Content-Type": "application/json", "X-Test": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := NewRequest(t, context.Background(), "POST", "http://127.0.0.1/x", tt.key, strings.NewReader("{}"), tt.hdr...)
			for name, want := range tt.want {
				if got := req.Header.Get(name); got != want {
					t.Errorf("%s %q, want %q", name, got, want)
				}
			}
		})
	}
}

package probes

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestMain puts gin in release mode once, as main does.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

func TestProbes(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("series\n")) })
	for _, tc := range []struct {
		name, path, auth string
		ready            bool
		open             int
		degraded, token  string
		status           int
		body             string
	}{
		{"healthz", "/healthz", "", false, 0, "", "", 200, `{"status":"ok"}`},
		{"ready", "/readyz", "", true, 0, "", "", 200, `{"status":"ready"}`},
		{"unready", "/readyz", "", false, 0, "", "", 503, `{"status":"unavailable"}`},
		{"ready_reports", "/readyz", "", true, 2, "record store", "", 200, `{"status":"ready","breakers_not_closed":2,"degraded":true,"reason":"record store"}`},
		{"metrics_open", "/metrics", "", true, 0, "", "", 200, "series\n"},
		{"metrics_token", "/metrics", "Bearer tok", true, 0, "", "tok", 200, "series\n"},
		{"metrics_refused", "/metrics", "Bearer nope", true, 0, "", "tok", 401, "metrics.bearer_token is set: send it as Authorization: Bearer <token>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var route string
			p := &Probes{
				Ready:        func() bool { return tc.ready },
				OpenBreakers: func() int { return tc.open },
				Degraded:     func() string { return tc.degraded },
				MetricsToken: func() string { return tc.token },
				Route:        func(_ *gin.Context, r string) { route = r },
			}
			e := gin.New()
			p.Mount(e, metrics)
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			e.ServeHTTP(w, r)
			if w.Code != tc.status || w.Body.String() != tc.body || route != tc.path {
				t.Fatalf("%d %q (route %q)", w.Code, w.Body, route)
			}
		})
	}
}

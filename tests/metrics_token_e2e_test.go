package tests

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// With metrics.bearer_token set, /metrics answers only a scrape that sends it; without it
// (every other ops test) /metrics stays open.
func TestMetricsBearerToken(t *testing.T) {
	const token = "metrics-scrape-token-0123456789"
	p := startPlatform(t)
	env := keysEnv(p)
	env["METRICS_TOKEN"] = token
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, "metrics:\n  bearer_token: ${METRICS_TOKEN}\n"), Env: env})
	cases := []struct {
		name, auth string
		want       int
	}{
		{"none", "", http.StatusUnauthorized},
		{"wrong", "Bearer not-the-token", http.StatusUnauthorized},
		{"team key", "Bearer " + alphaKey, http.StatusUnauthorized},
		{"right", "Bearer " + token, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx(t), "GET", g.URL+"/metrics", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want != http.StatusOK && (strings.Contains(string(body), "modelgate_") || strings.Contains(string(body), token)) {
				t.Fatalf("a refused scrape saw metrics or the token: %s", body)
			}
			if tc.want == http.StatusOK && !strings.Contains(string(body), "modelgate_") {
				t.Fatalf("no metrics: %.300s", body)
			}
		})
	}
	g.assertNoSecret(t, token)
}

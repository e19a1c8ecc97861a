package tests

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitStatus polls url until it answers want.
func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := 0
	for time.Now().Before(deadline) {
		code, _, _, err := opsDo(t, http.MethodGet, url, "", "")
		if err == nil && code == want {
			return
		}
		last = code
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d (last %d)", url, want, last)
}

// TestReadinessFollowsPlatform: /readyz tracks whether the platform can be reached, from the
// background probe, while /healthz stays 200 throughout.
func TestReadinessFollowsPlatform(t *testing.T) {
	p := startPlatform(t)
	addr := freePort(t) // nothing listens here until the test starts the platform on it
	cfg := keysConfig(&platform{URL: "http://" + addr}, "")
	cfg = strings.Replace(cfg, "  api_key: ${PLATFORM_API_KEY}\n", "  api_key: ${PLATFORM_API_KEY}\n  health_interval: 50ms\n", 1)
	if !strings.Contains(cfg, "health_interval: 50ms") {
		t.Fatal("keysConfig changed: health_interval was not set")
	}
	fast := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})

	waitStatus(t, fast.URL+"/readyz", http.StatusServiceUnavailable)
	if code, _ := opsMust(t, http.MethodGet, fast.URL+"/healthz", "", ""); code != http.StatusOK {
		t.Fatalf("/healthz = %d while the platform is down; liveness must not depend on it", code)
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on the platform's port: %v", err)
	}
	srv := &http.Server{Handler: p.Sim}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	waitStatus(t, fast.URL+"/readyz", http.StatusOK)
	if code, body := opsMust(t, http.MethodPost, fast.URL+"/v1/chat/completions", alphaKey, chatBody("sim-chat", "hi", false)); code != 200 {
		t.Errorf("request once ready: %d %s", code, body)
	}

	srv.Close()
	waitStatus(t, fast.URL+"/readyz", http.StatusServiceUnavailable)
	if code, _ := opsMust(t, http.MethodGet, fast.URL+"/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz = %d after the platform went away", code)
	}
}

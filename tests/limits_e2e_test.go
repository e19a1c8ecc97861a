package tests

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// startRedis runs a private redis-server and returns its URL. Without the binary the test is
// skipped on a developer machine and fails in CI, where .ci/run installs it.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found and CI is set: %v", err)
		}
		t.Skip("redis-server not installed; .ci/run installs it")
	}
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "redis://" + addr + "/0"
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startReplicas runs two gateways on one platform that share a private Redis as their
// ratelimit store (c's ratelimit section is replaced); env gets the platform's key.
func startReplicas(t *testing.T, c gatewayYAML, env map[string]string) (p *platform, g1, g2 *gateway) {
	t.Helper()
	redisURL := startRedis(t)
	p = startPlatform(t)
	c.ratelimit = "  store: " + redisURL + "\n"
	cfg := c.render(p)
	env["PLATFORM_API_KEY"] = p.Key
	g1 = startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: env})
	g2 = startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: env})
	return p, g1, g2
}

func postJSON(t testing.TB, url, key, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Two modelgate processes sharing one Redis enforce one team limit together.
func TestTwoGatewaysShareOneTeamLimit(t *testing.T) {
	p, g1, g2 := startReplicas(t, gatewayYAML{
		models: "  - id: sim-chat\n  - id: sim-long\n",
		teams: `  - name: alpha
    limits: { requests_per_minute: 10 }
    keys:
      - name: alpha-1
        key: ${ALPHA_KEY}
      - name: alpha-2
        key: ${BETA_KEY}
`,
	}, map[string]string{"ALPHA_KEY": alphaKey, "BETA_KEY": betaKey})

	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		g, key := g1, alphaKey
		if i%2 == 1 {
			g, key = g2, betaKey // the team's other key, on the other replica
		}
		wg.Go(func() {
			status, _, b := postJSON(t, g.URL+"/v1/responses", key, `{"model":"sim-chat","input":"hi"}`)
			switch status {
			case 200:
				ok.Add(1)
			case 429:
				refused.Add(1)
			default:
				t.Errorf("status %d: %s", status, b)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 10 || refused.Load() != 30 {
		t.Fatalf("admitted %d, refused %d; want exactly 10 and 30 across both replicas", ok.Load(), refused.Load())
	}
	if got := p.Sim.Totals(p.Key).Requests; got != 10 {
		t.Errorf("platform saw %d generations, want 10", got)
	}
}

// A restart in the middle of a day keeps the day's usage and the refusal it implies.
func TestRestartKeepsDailyBudget(t *testing.T) {
	p := startPlatform(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := gatewayYAML{
		models:    "  - id: sim-chat\n  - id: sim-long\n",
		ratelimit: "  data_path: " + dataDir + "\n",
		teams:     alphaTeam("{ tokens_per_day: 100 }"),
	}.render(p)
	env := map[string]string{"PLATFORM_API_KEY": p.Key, "ALPHA_KEY": alphaKey}

	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: env})
	if status, _, b := postJSON(t, g.URL+"/v1/responses", alphaKey, `{"model":"sim-long","input":"spend the day"}`); status != 200 {
		t.Fatalf("first request: %d %s", status, b)
	}
	status, _, b := postJSON(t, g.URL+"/v1/responses", alphaKey, `{"model":"sim-chat","input":"again"}`)
	if status != 429 || !bytes.Contains(b, []byte("insufficient_quota")) {
		t.Fatalf("before restart: %d %s; want 429 insufficient_quota", status, b)
	}
	g.Signal(t, syscall.SIGTERM)
	if code := g.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	g2 := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: env})
	before := p.Sim.Totals(p.Key).Requests
	status, hdr, b := postJSON(t, g2.URL+"/v1/responses", alphaKey, `{"model":"sim-chat","input":"after restart"}`)
	if status != 429 || !bytes.Contains(b, []byte("insufficient_quota")) || hdr.Get("X-Should-Retry") != "false" {
		t.Fatalf("after restart: %d %s; want 429 insufficient_quota with x-should-retry false", status, b)
	}
	if p.Sim.Totals(p.Key).Requests != before {
		t.Errorf("a refused request reached the platform")
	}
	if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", hdr.Get("Retry-After"))
	}
}

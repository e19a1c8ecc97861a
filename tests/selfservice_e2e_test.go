package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// selfServiceConfig keeps its data in dataDir, so a restarted process finds it again.
func selfServiceConfig(p *platform, dataDir string) string {
	return gatewayYAML{
		models:    "  - id: sim-chat\n    price: {input: 1.5, output: 6}\n",
		ratelimit: "  data_path: " + dataDir + "\n",
		teams:     alphaTeam("{spend_per_month: 100}"),
		more:      "pricing:\n  currency: USD\n" + adminKeys,
	}.render(p)
}

// keysCLI runs the real binary's keys subcommand with the admin key in its environment.
func keysCLI(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binPath, append(append([]string{"keys"}, args...), "--url", url)...)
	cmd.Env = append(os.Environ(), "MODELGATE_ADMIN_KEY="+adminKey)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSelfServiceAcrossRestart(t *testing.T) {
	p := startPlatform(t)
	dataDir := t.TempDir()
	opts := gatewayOptions{ConfigYAML: selfServiceConfig(p, dataDir), Env: keysEnv(p)}
	g := startGateway(t, opts)

	out, err := keysCLI(t, g.URL, "create", "--team", "alpha", "--name", "cli-bot", "--limit", "requests_per_minute=100")
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^id:\s+(\S+)\nkey:\s+(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("keys create printed %q", out)
	}
	id, secret := m[1], m[2]
	chat := func(g *gateway, key string) int {
		code, _ := opsMust(t, "POST", g.URL+"/v1/chat/completions", key, chatBody("sim-chat", "hello there", false))
		return code
	}
	if code := chat(g, secret); code != 200 {
		t.Fatalf("chat with the key the CLI issued: %d", code)
	}
	// A reload builds a new authenticator; issued keys stay in force.
	g.Signal(t, syscall.SIGHUP)
	waitForLog(t, g, "config reloaded", 1)
	if code := chat(g, secret); code != 200 {
		t.Fatalf("after a reload: %d", code)
	}
	if code, body := opsMust(t, "GET", g.URL+"/metrics", "", ""); code != 200 || !strings.Contains(body, `modelgate_spend_total{model="sim-chat",team="alpha"}`) {
		t.Errorf("no spend metric: %d", code)
	}

	// Stopped and started again: key, spend and history are still there.
	g.Signal(t, syscall.SIGTERM)
	if code := g.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	g2 := startGateway(t, opts)
	if code := chat(g2, secret); code != 200 {
		t.Fatalf("the issued key after a restart: %d", code)
	}
	code, body := opsMust(t, "GET", g2.URL+"/admin/usage/history?group_by=key", adminKey, "")
	var hist struct {
		Rows []struct {
			Team, Key string
			Requests  int64
			Cost      float64
		}
	}
	if err := json.Unmarshal([]byte(body), &hist); code != 200 || err != nil || len(hist.Rows) != 1 ||
		hist.Rows[0].Key != "cli-bot" || hist.Rows[0].Requests != 3 || hist.Rows[0].Cost <= 0 {
		t.Fatalf("history after restart: %d %s", code, body)
	}
	code, body = opsMust(t, "GET", g2.URL+"/admin/teams", adminKey, "")
	var teams struct {
		Teams []struct {
			Usage struct {
				SpendMonth float64 `json:"spend_month"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &teams); code != 200 || err != nil || len(teams.Teams) != 1 ||
		teams.Teams[0].Usage.SpendMonth < 2*hist.Rows[0].Cost/3 {
		t.Fatalf("spend after restart: %d %s (history says %v)", code, body, hist.Rows[0].Cost)
	}

	// The list shows the key's own limits and, after the restart, today's three requests and
	// a spend above zero (issue 45).
	out, err = keysCLI(t, g2.URL, "list", "--team", "alpha")
	if err != nil || !regexp.MustCompile(`(?m)^`+id+`\s+alpha\s+cli-bot\s+api\s+requests_per_minute=100\s+3\s+0\.0*[1-9]\d*\s+\d{4}-`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^config:alpha:alpha-1\s+alpha\s+alpha-1\s+config\s+-\s+0\s+0\s`).MatchString(out) || strings.Contains(out, secret) {
		t.Fatalf("keys list: %v\n%s", err, out)
	}
	if out, err := keysCLI(t, g2.URL, "revoke", id); err != nil || out != "revoked key "+id+" (team alpha, name cli-bot)\n" {
		t.Fatalf("keys revoke: %v\n%s", err, out)
	}
	if code := chat(g2, secret); code != 401 {
		t.Fatalf("after revoke: %d", code)
	}
	if out, err := keysCLI(t, g2.URL, "revoke", "config:alpha:alpha-1"); err == nil || !strings.Contains(out, "409") {
		t.Fatalf("revoking a config key: %v %s", err, out)
	}
	code, hdr, page, _ := opsDo(t, "GET", g2.URL+"/admin/ui/", "", "")
	if code != 200 || !strings.Contains(page, "<title>modelgate") || !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("dashboard: %d %v", code, hdr)
	}
	g2.assertNoSecret(t, secret)
	g.assertNoSecret(t, secret)
}

package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// auditSummary reads GET /admin/audit and returns its entries as "actor action target",
// newest first, with the paths a reload changed after it.
func auditSummary(t *testing.T, g *gateway) (lines []string, body string) {
	t.Helper()
	code, body := opsMust(t, "GET", g.URL+"/admin/audit?limit=50", adminKey, "")
	if code != 200 {
		t.Fatalf("GET /admin/audit: %d %s", code, body)
	}
	var page struct {
		Entries []struct {
			Actor, Action, Target string
			Changed               []string
		}
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Entries {
		line := e.Actor + " " + e.Action
		if e.Action == "key.issued" || e.Action == "key.revoked" {
			line += " " + e.Target
		}
		if len(e.Changed) > 0 {
			line += " [" + strings.Join(e.Changed, " ") + "]"
		}
		lines = append(lines, line)
	}
	return lines, body
}

// TestAuditAcrossReloadAndRestart drives the real binary: a key issued and revoked, a
// config reload that changes a limit and a secret, a reload refused; each leaves its entry,
// the entries hold no secret, and a restarted process still has them all.
func TestAuditAcrossReloadAndRestart(t *testing.T) {
	p := startPlatform(t)
	dataDir := t.TempDir()
	env := keysEnv(p)
	opts := gatewayOptions{ConfigYAML: selfServiceConfig(p, dataDir), Env: env}
	g := startGateway(t, opts)

	code, body := opsMust(t, "POST", g.URL+"/admin/keys", adminKey, `{"team":"alpha","name":"audited"}`)
	if code != 201 {
		t.Fatalf("issue: %d %s", code, body)
	}
	id, secret := gjson.Get(body, "id").Str, gjson.Get(body, "key").Str
	if code, body := opsMust(t, "DELETE", g.URL+"/admin/keys/"+id, adminKey, ""); code != 200 {
		t.Fatalf("revoke: %d %s", code, body)
	}

	// The reload changes a team budget and the team's config key (its value never shows).
	changed := strings.Replace(selfServiceConfig(p, dataDir), "{spend_per_month: 100}", "{spend_per_month: 200}", 1)
	changed = strings.Replace(changed, "key: ${ALPHA_KEY}", "key: mg-e2e-alpha-rotated-secret", 1)
	if changed == selfServiceConfig(p, dataDir) || !strings.Contains(changed, "rotated") {
		t.Fatal("selfServiceConfig changed: update this test")
	}
	reload(t, g, changed, "config reloaded", 1)
	reload(t, g, changed+"teams: [\n", "config reload rejected", 1)

	sum := sha256.Sum256([]byte(adminKey))
	admin := "admin:" + hex.EncodeToString(sum[:4])
	want := []string{
		"signal:SIGHUP config.reload_rejected",
		"signal:SIGHUP config.reloaded [teams[alpha].limits.spend_per_month teams[alpha].keys[alpha-1].key]",
		admin + " key.revoked alpha/audited",
		admin + " key.issued alpha/audited",
	}
	got, raw := auditSummary(t, g)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, leak := range []string{secret, adminKey, "rotated-secret", env["ALPHA_KEY"]} {
		if strings.Contains(raw, leak) {
			t.Fatalf("the audit log shows %q: %s", leak, raw)
		}
	}

	g.Signal(t, syscall.SIGTERM)
	if code := g.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	g2 := startGateway(t, opts)
	if got, _ := auditSummary(t, g2); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after a restart the audit log is:\n%s", strings.Join(got, "\n"))
	}
}

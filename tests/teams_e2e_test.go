package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
)

// adminCall sends an admin API request with the admin key and returns the status and body.
func adminCall(t testing.TB, method, url, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	status, _, b := apitest.Do(t, method, url, adminKey, rd)
	return status, b
}

// waitForStatus calls fn until it answers want, for up to 15 seconds (a loaded CI box), and
// returns how long that took.
func waitForStatus(t testing.TB, what string, want int, fn func() (int, []byte)) time.Duration {
	t.Helper()
	start := time.Now()
	var status int
	var b []byte
	for deadline := start.Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if status, b = fn(); status == want {
			return time.Since(start)
		}
	}
	t.Fatalf("%s: still %d %s after 15s, want %d", what, status, b, want)
	return 0
}

// TestRuntimeTeamOnTwoReplicas: a team created through one replica's admin API, with a key
// issued to it, is served by a second replica sharing the Redis store; a budget lowered
// through PATCH on the first is enforced by the second without a reload; the audit log
// (shared) holds both changes; a config team is not patched.
func TestRuntimeTeamOnTwoReplicas(t *testing.T) {
	p, g1, g2 := startReplicas(t, gatewayYAML{
		models: "  - id: sim-chat\n    price: {input: 1.0, output: 4.0}\n  - id: sim-long\n",
		teams:  alphaTeam(""),
		more:   adminKeys,
	}, map[string]string{"ALPHA_KEY": alphaKey, "ADMIN_KEY": adminKey})

	status, b := adminCall(t, "POST", g1.URL+"/admin/teams",
		`{"name":"growth","models":["sim-chat"],"limits":{"spend_per_day":5,"requests_per_minute":1000},"end_user_limits":{"requests_per_minute":100}}`)
	if status != http.StatusCreated || !bytes.Contains(b, []byte(`"source":"api"`)) {
		t.Fatalf("POST /admin/teams: %d %s", status, b)
	}
	status, b = adminCall(t, "POST", g1.URL+"/admin/keys", `{"team":"growth","name":"bot"}`)
	if status != http.StatusCreated {
		t.Fatalf("a key for the runtime team: %d %s", status, b)
	}
	var issued struct{ ID, Key string }
	if err := json.Unmarshal(b, &issued); err != nil || issued.Key == "" {
		t.Fatalf("issue answer %s: %v", b, err)
	}
	call := func(g *gateway) func() (int, []byte) {
		return func() (int, []byte) {
			status, _, b := postJSON(t, g.URL+"/v1/responses", issued.Key, `{"model":"sim-chat","input":"hi","max_output_tokens":64}`)
			return status, b
		}
	}
	if status, b := call(g1)(); status != http.StatusOK {
		t.Fatalf("the key on the replica that issued it: %d %s", status, b)
	}
	took := waitForStatus(t, "the key on the other replica", http.StatusOK, call(g2))
	t.Logf("the second replica served the new team's key after %v", took)

	// Below what one call can cost: refused on the replica that took the patch at once, and
	// on the other within its poll.
	status, b = adminCall(t, "PATCH", g1.URL+"/admin/teams/growth", `{"limits":{"spend_per_day":0.000001}}`)
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"spend_per_day":0.000001`)) || !bytes.Contains(b, []byte(`"requests_per_minute":1000`)) {
		t.Fatalf("PATCH: %d %s", status, b)
	}
	if status, b := call(g1)(); status != http.StatusTooManyRequests || !bytes.Contains(b, []byte("insufficient_quota")) {
		t.Fatalf("the patched replica: %d %s, want 429 insufficient_quota", status, b)
	}
	took = waitForStatus(t, "the lowered budget on the other replica", http.StatusTooManyRequests, call(g2))
	t.Logf("the second replica refused past the lowered budget after %v", took)
	before := p.Sim.Totals(p.Key).Requests
	if status, b := call(g2)(); status != http.StatusTooManyRequests || !bytes.Contains(b, []byte("insufficient_quota")) {
		t.Fatalf("the other replica, again: %d %s", status, b)
	}
	if after := p.Sim.Totals(p.Key).Requests; after != before {
		t.Errorf("a refused call reached the platform (%d calls)", after-before)
	}

	// The config's team is the config file's business.
	status, b = adminCall(t, "PATCH", g2.URL+"/admin/teams/alpha", `{"limits":{"spend_per_day":1}}`)
	if status != http.StatusConflict || !bytes.Contains(b, []byte("defined in the config file")) {
		t.Fatalf("PATCH of a config team: %d %s", status, b)
	}

	// One audit log for both replicas: the creation and the change, with what changed.
	status, b = adminCall(t, "GET", g2.URL+"/admin/audit?limit=10", "")
	if status != http.StatusOK {
		t.Fatalf("audit: %d %s", status, b)
	}
	var page struct {
		Entries []struct {
			Action, Target string
			Changed        []string
			Details        map[string]string
		}
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Entries {
		got = append(got, e.Action+" "+e.Target+" "+strings.Join(e.Changed, ",")+" "+e.Details["limits_before"]+" -> "+e.Details["limits"])
	}
	want := []string{
		"team.updated growth limits.spend_per_day requests_per_minute=1000,spend_per_day=5 -> requests_per_minute=1000,spend_per_day=1e-06",
		"key.issued growth/bot   -> ",
		"team.created growth   -> requests_per_minute=1000,spend_per_day=5",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The CLI lists both teams through the other replica.
	cmd := exec.Command(binPath, "teams", "list", "--url", g2.URL)
	cmd.Env = []string{"MODELGATE_ADMIN_KEY=" + adminKey}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("growth")) || !bytes.Contains(out, []byte("spend_per_day=0.000001")) || !bytes.Contains(out, []byte("alpha")) {
		t.Fatalf("modelgate teams list: %v\n%s", err, out)
	}
	for _, g := range []*gateway{g1, g2} {
		g.assertNoSecret(t, issued.Key)
		g.assertNoSecret(t, p.Key)
	}
}

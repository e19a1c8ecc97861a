package tests

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

const (
	gammaKey = "mg-e2e-gamma"
	deltaKey = "mg-e2e-delta"
)

// reloadEnv gives the process every variable the configs of these tests use, so a reload
// only has to change the file.
func reloadEnv(p *platform) map[string]string {
	env := keysEnv(p)
	env["GAMMA_KEY"] = gammaKey
	env["DELTA_KEY"] = deltaKey
	return env
}

// deltaTeam has a tiny request budget, to show that a reload keeps limiter state.
const deltaTeam = `
  - name: delta
    keys:
      - name: delta-1
        key: ${DELTA_KEY}
        limits: { requests_per_minute: 2 }
`

// withTeams appends team entries to keysConfig's team list (just before admin_keys).
func withTeams(cfg, teams string) string {
	return strings.Replace(cfg, "admin_keys:", strings.TrimPrefix(teams, "\n")+"admin_keys:", 1)
}

// withoutBeta drops team beta from keysConfig.
func withoutBeta(cfg string) string {
	const beta = "  - name: beta\n    models: [sim-chat]\n    keys:\n      - name: beta-1\n        key: ${BETA_KEY}\n"
	if !strings.Contains(cfg, beta) {
		panic("keysConfig changed: update withoutBeta")
	}
	return strings.Replace(cfg, beta, "", 1)
}

func writeConfig(t *testing.T, g *gateway, text string) {
	t.Helper()
	if err := os.WriteFile(g.ConfigPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadUnderLoad swaps the config while requests and a slow stream are in flight: the new
// key works at once, the removed key is refused, the stream finishes with its terminal event,
// no request of a surviving key fails, and a surviving key's limiter state is kept.
func TestReloadUnderLoad(t *testing.T) {
	for _, tc := range slowStreams() {
		t.Run(tc.name, func(t *testing.T) {
			p := startPlatform(t)
			before := withTeams(keysConfig(p, ""), deltaTeam)
			g := startGateway(t, gatewayOptions{ConfigYAML: before, Env: reloadEnv(p)})
			chat := g.URL + "/v1/chat/completions"

			// Spend delta's budget before the reload.
			for i := range 2 {
				if code, body := opsMust(t, "POST", chat, deltaKey, chatBody("sim-chat", "hi", false)); code != 200 {
					t.Fatalf("delta request %d: %d %s", i, code, body)
				}
			}
			if code, _ := opsMust(t, "POST", chat, gammaKey, chatBody("sim-chat", "hi", false)); code != http.StatusUnauthorized {
				t.Fatalf("gamma before the reload: %d, want 401", code)
			}

			stream := startStream(t, g.URL+tc.route, alphaKey, tc.body)
			if stream.status != 200 {
				t.Fatalf("stream status %d", stream.status)
			}
			stream.waitStarted(t)

			// Steady load from a key that survives the reload.
			var stop atomic.Bool
			var sent, failed atomic.Int64
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						code, _, _, err := opsDo(t, "POST", chat, alphaKey, chatBody("sim-chat", "load", false))
						sent.Add(1)
						if err != nil || code != 200 {
							failed.Add(1)
						}
					}
				}()
			}

			after := withTeams(withoutBeta(keysConfig(p, "")), deltaTeam+`
  - name: gamma
    keys:
      - name: gamma-1
        key: ${GAMMA_KEY}
`)
			writeConfig(t, g, after)
			g.Signal(t, syscall.SIGHUP)
			waitForLog(t, g, "config reloaded", 1)
			stream.stillOpen(t, "the reload")

			if code, body := opsMust(t, "POST", chat, gammaKey, chatBody("sim-chat", "hi", false)); code != 200 {
				t.Errorf("new key right after the reload: %d %s", code, body)
			}
			if code, _ := opsMust(t, "POST", chat, betaKey, chatBody("sim-chat", "hi", false)); code != http.StatusUnauthorized {
				t.Errorf("removed key after the reload: %d, want 401", code)
			}
			if code, _ := opsMust(t, "POST", chat, deltaKey, chatBody("sim-chat", "hi", false)); code != http.StatusTooManyRequests {
				t.Errorf("delta's third request in the minute: %d, want 429 (the reload must not reset its budget)", code)
			}

			body := stream.wait(t)
			stop.Store(true)
			wg.Wait()
			if stream.err != nil {
				t.Errorf("stream across the reload broke: %v", stream.err)
			}
			if !strings.Contains(body, tc.terminal) {
				t.Errorf("stream across the reload lacks %q:\n%.2000s", tc.terminal, body)
			}
			if sent.Load() == 0 || failed.Load() != 0 {
				t.Errorf("load during the reload: %d of %d requests failed", failed.Load(), sent.Load())
			}
			fams := scrape(t, g)
			if got := counterSum(fams, "modelgate_config_reloads_total", map[string]string{"result": "applied"}); got != 1 {
				t.Errorf("reloads applied = %v, want 1", got)
			}
			if got := counterSum(fams, "modelgate_requests_total", map[string]string{"team": "gamma", "key": "gamma-1", "status": "200"}); got != 1 {
				t.Errorf("the new team's request is not labelled with its name after the reload (got %v)", got)
			}
		})
	}
}

// TestReloadRejectsBrokenConfig feeds broken configs: each is rejected with a log line and the
// old config keeps serving, including keys the broken file would have removed or added.
func TestReloadRejectsBrokenConfig(t *testing.T) {
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, ""), Env: reloadEnv(p)})
	chat := g.URL + "/v1/chat/completions"
	gammaTeam := "\n  - name: gamma\n    keys:\n      - name: gamma-1\n        key: ${GAMMA_KEY}\n"

	for i, tc := range []struct {
		name, config string
	}{
		{"yaml_syntax", withTeams(keysConfig(p, ""), gammaTeam) + "teams: [\n"},
		{"unknown_key", withTeams(keysConfig(p, "rate_limits: {}\n"), gammaTeam)},
		{"unset_variable", withTeams(withoutBeta(keysConfig(p, "")), gammaTeam+"  - name: eps\n    keys:\n      - name: eps-1\n        key: ${MODELGATE_TEST_UNSET_VAR}\n")},
		{"negative_limit", withTeams(withoutBeta(keysConfig(p, "")), gammaTeam+"  - name: eps\n    limits: { requests_per_minute: -1 }\n    keys:\n      - name: eps-1\n        key: mg-e2e-eps\n")},
		{"duplicate_key", withTeams(withoutBeta(keysConfig(p, "")), "  - name: eps\n    keys:\n      - name: eps-1\n        key: ${ALPHA_KEY}\n")},
		{"empty_file", ""},
		{"switches_to_passthrough", "upstream:\n  gateway_url: " + p.URL + "\n  base_url: " + p.URL + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeConfig(t, g, tc.config)
			g.Signal(t, syscall.SIGHUP)
			waitForLog(t, g, "config reload rejected", i+1)

			checkRefusedReload(t, g, []keyWant{
				{"alpha_still_works", alphaKey, 200},
				{"beta_still_works", betaKey, 200},
				{"gamma_not_added", gammaKey, 401},
			})
		})
	}
	if got := counterSum(scrape(t, g), "modelgate_config_reloads_total", map[string]string{"result": "rejected"}); got != 7 {
		t.Errorf("reloads rejected = %v, want 7", got)
	}

	// After all that, a good config still applies.
	writeConfig(t, g, withTeams(keysConfig(p, ""), gammaTeam))
	g.Signal(t, syscall.SIGHUP)
	waitForLog(t, g, "config reloaded", 1)
	if code, _ := opsMust(t, "POST", chat, gammaKey, chatBody("sim-chat", "hi", false)); code != 200 {
		t.Errorf("gamma after a good reload: %d", code)
	}
}

package tests

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
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

// reload writes text as g's config, sends SIGHUP and waits for the n-th log line that says
// want: "config reloaded", or "config reload rejected" for a config the gateway must refuse.
func reload(t *testing.T, g *gateway, text, want string, n int) {
	t.Helper()
	apitest.WriteFile(t, g.ConfigPath, []byte(text))
	g.Signal(t, syscall.SIGHUP)
	waitForLog(t, g, want, n)
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
			reload(t, g, after, "config reloaded", 1)
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
			reload(t, g, tc.config, "config reload rejected", i+1)

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
	reload(t, g, withTeams(keysConfig(p, ""), gammaTeam), "config reloaded", 1)
	if code, _ := opsMust(t, "POST", chat, gammaKey, chatBody("sim-chat", "hi", false)); code != 200 {
		t.Errorf("gamma after a good reload: %d", code)
	}
}

// simReloadConfig is a --simulate config whose secrets are all unset ${VAR}s, so each
// becomes its placeholder sim-VAR; one weighted route, moved
// by the reload as docs/routing.md's canary is widened.
const simReloadConfig = `
upstream:
  api_key: ${SIMRELOAD_PLATFORM_KEY}
models:
  - id: assistant
    routes:
      - {upstream: assistant-v1, weight: 1}
teams:
  - name: first
    keys:
      - name: first-1
        key: ${SIMRELOAD_FIRST_KEY}
`

// TestSimulateReload sends SIGHUP to a --simulate gateway whose config was edited: the new
// config applies (a new team's placeholder key works, the route moved), and the
// embedded platform that answers is the one started with the process, at the same address.
func TestSimulateReload(t *testing.T) {
	g := startGateway(t, gatewayOptions{ConfigYAML: simReloadConfig, Args: []string{"--simulate", "--log-format", "json"}})
	const firstKey, secondKey = "sim-SIMRELOAD_FIRST_KEY", "sim-SIMRELOAD_SECOND_KEY"
	responses := g.URL + "/v1/responses"

	ask := func(key string) (int, string) {
		t.Helper()
		return opsMust(t, "POST", responses, key, responsesBody("assistant", "hi", false))
	}
	code, before := ask(firstKey)
	if code != 200 || gjson.Get(before, "model").Str != "assistant-v1" {
		t.Fatalf("before the reload: %d %s, want 200 from assistant-v1", code, before)
	}
	if code, _ := ask(secondKey); code != 401 {
		t.Fatalf("second team's key before the reload: %d, want 401", code)
	}

	edited := strings.Replace(simReloadConfig, "assistant-v1", "assistant-v2", 1)
	edited += `  - name: second
    keys:
      - name: second-1
        key: ${SIMRELOAD_SECOND_KEY}
`
	reload(t, g, edited, "config reloaded", 1)
	if strings.Contains(g.Output.String(), "reload rejected") {
		t.Fatalf("reload rejected:\n%s", g.Output.String())
	}

	for _, key := range []string{firstKey, secondKey} {
		code, after := ask(key)
		if code != 200 || gjson.Get(after, "model").Str != "assistant-v2" {
			t.Fatalf("after the reload: %d %s, want 200 from assistant-v2", code, after)
		}
		// The platform's ids carry its run's tag and one counter: the same tag, and a
		// counter that went on, is the same platform instance.
		if tag(t, after) != tag(t, before) {
			t.Fatalf("response ids %s and %s: another platform answered after the reload",
				gjson.Get(before, "id").Str, gjson.Get(after, "id").Str)
		}
	}
	out := g.Output.String()
	if n := strings.Count(out, "simulated platform running"); n != 1 {
		t.Fatalf("the simulated platform started %d times, want once", n)
	}
	if !strings.Contains(out, "using placeholder sim-SIMRELOAD_SECOND_KEY") {
		t.Fatalf("the reload did not expand the new ${VAR} to its placeholder:\n%s", out)
	}
}

// respTag is the run tag of a simulated platform's response id: resp_<8 hex><6 digits>.
var respTag = regexp.MustCompile(`^resp_([0-9a-f]{8})[0-9]+$`)

func tag(t *testing.T, body string) string {
	t.Helper()
	m := respTag.FindStringSubmatch(gjson.Get(body, "id").Str)
	if m == nil {
		t.Fatalf("response id %q: not a simulated platform's", gjson.Get(body, "id").Str)
	}
	return m[1]
}

// TestReloadDropsStaleSeries removes team beta by a reload: /metrics then has no series
// labelled with beta or its key, and alpha's series are still there.
func TestReloadDropsStaleSeries(t *testing.T) {
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, ""), Env: reloadEnv(p)})
	chat := g.URL + "/v1/chat/completions"
	for _, key := range []string{alphaKey, betaKey} {
		if code, body := opsMust(t, "POST", chat, key, chatBody("sim-chat", "hi", false)); code != 200 {
			t.Fatalf("request before the reload: %d %s", code, body)
		}
	}
	beta := map[string]string{"team": "beta"}
	if len(metricSeries(scrape(t, g), "modelgate_requests_total", beta)) == 0 {
		t.Fatal("no series for team beta before the reload")
	}

	reload(t, g, withoutBeta(keysConfig(p, "")), "config reloaded", 1)

	fams := scrape(t, g)
	for name := range fams {
		if s := metricSeries(fams, name, beta); len(s) > 0 {
			t.Errorf("%s still has series of the removed team: %v", name, s[0].GetLabel())
		}
		if s := metricSeries(fams, name, map[string]string{"key": "beta-1"}); len(s) > 0 {
			t.Errorf("%s still has series of the removed key: %v", name, s[0].GetLabel())
		}
	}
	if got := counterSum(fams, "modelgate_requests_total", map[string]string{"team": "alpha", "key": "alpha-1", "status": "200"}); got != 1 {
		t.Errorf("alpha's series after the reload: %v, want 1", got)
	}
}

// A reload that adds a config key named like a key issued to the same team is refused: the
// two would share one limit scope. The old config keeps serving and the reason is logged.
func TestReloadRefusesConfigKeyNamedLikeIssuedKey(t *testing.T) {
	p := startPlatform(t)
	env := reloadEnv(p)
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, ""), Env: env})
	code, body := opsMust(t, "POST", g.URL+"/admin/keys", adminKey, `{"team":"alpha","name":"bot"}`)
	if code != 201 {
		t.Fatalf("issue: %d %s", code, body)
	}
	issued := gjson.Get(body, "key").Str
	chat := g.URL + "/v1/chat/completions"
	if code, body := opsMust(t, "POST", chat, issued, chatBody("sim-chat", "hi", false)); code != 200 {
		t.Fatalf("issued key: %d %s", code, body)
	}

	// Team alpha gains a config key named "bot", like the issued one.
	clashing := strings.Replace(keysConfig(p, ""), "      - name: alpha-2\n",
		"      - name: bot\n        key: ${GAMMA_KEY}\n      - name: alpha-2\n", 1)
	if clashing == keysConfig(p, "") {
		t.Fatal("keysConfig changed: update this test")
	}
	reload(t, g, clashing, "config reload rejected", 1)
	if !strings.Contains(g.Output.String(), `key \"bot\" is also the name of a key issued`) {
		t.Errorf("the rejection does not say why:\n%s", g.Output.String())
	}
	checkRefusedReload(t, g, []keyWant{
		{"issued key still works", issued, 200},
		{"config key kept", alphaKey, 200},
		{"clashing key not added", gammaKey, 401},
	})
}

// TestReloadNarrowsAKey: a config key given its own models on reload is held to them at once
// (its team's other models refused as the allow-list refuses, its team's other keys
// untouched), and a reload whose key lists a model outside its team's list is rejected with
// an error naming the key, the running config serving on.
func TestReloadNarrowsAKey(t *testing.T) {
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, ""), Env: reloadEnv(p)})
	chat := g.URL + "/v1/chat/completions"
	if code, body := opsMust(t, "POST", chat, alpha2Key, chatBody("sim-chat", "hi", false)); code != 200 {
		t.Fatalf("before the reload: %d %s", code, body)
	}

	const alpha2 = "        key: ${ALPHA2_KEY}\n"
	narrowed := strings.Replace(keysConfig(p, ""), alpha2, alpha2+"        models: [sim-long]\n", 1)
	if narrowed == keysConfig(p, "") {
		t.Fatal("keysConfig changed: update this test")
	}
	reload(t, g, narrowed, "config reloaded", 1)
	for _, c := range []struct {
		key, model string
		want       int
	}{
		{alpha2Key, "sim-chat", 404},
		{alpha2Key, "sim-long", 200},
		{alphaKey, "sim-chat", 200},
	} {
		if code, body := opsMust(t, "POST", chat, c.key, chatBody(c.model, "hi", false)); code != c.want {
			t.Errorf("%s on %s after the reload: %d %s, want %d", c.key, c.model, code, body, c.want)
		}
	}

	outside := strings.Replace(narrowed, "        key: ${BETA_KEY}\n", "        key: ${BETA_KEY}\n        models: [sim-long]\n", 1)
	reload(t, g, outside, "config reload rejected", 1)
	if out := g.Output.String(); !strings.Contains(out, `teams[1].keys[0].models[0]: key \"beta-1\": model \"sim-long\" is not in its team's models`) &&
		!strings.Contains(out, `teams[1].keys[0].models[0]: key "beta-1": model "sim-long" is not in its team's models`) {
		t.Errorf("the rejection does not name the key and model:\n%s", out)
	}
	if code, _ := opsMust(t, "POST", chat, alpha2Key, chatBody("sim-chat", "hi", false)); code != 404 {
		t.Errorf("after the rejected reload the narrowed key got %d on sim-chat, want 404 (the running config)", code)
	}
	if code, _ := opsMust(t, "POST", chat, betaKey, chatBody("sim-chat", "hi", false)); code != 200 {
		t.Errorf("beta after the rejected reload: %d", code)
	}
}

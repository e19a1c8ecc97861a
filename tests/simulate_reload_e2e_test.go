package tests

import (
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"
)

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
	writeConfig(t, g, edited)
	g.Signal(t, syscall.SIGHUP)
	waitForLog(t, g, "config reloaded", 1)
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

package tests

import (
	"syscall"
	"testing"
)

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

	writeConfig(t, g, withoutBeta(keysConfig(p, "")))
	g.Signal(t, syscall.SIGHUP)
	waitForLog(t, g, "config reloaded", 1)

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

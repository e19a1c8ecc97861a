package tests

import (
	"strings"
	"testing"
)

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

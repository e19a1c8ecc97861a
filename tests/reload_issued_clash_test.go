package tests

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

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

package tests

import (
	"os"
	"strings"
	"testing"
)

// The server warns at start about weak local keys, naming where they are and never what they
// are; the placeholders --simulate puts in place of unset variables are not warned about.
func TestWeakLocalKeyWarnings(t *testing.T) {
	example, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"PLATFORM_API_KEY", "SEARCH_PLATFORM_KEY", "SEARCH_APP_KEY", "CHAT_APP_KEY", "MODELGATE_ADMIN_KEY"} {
		if _, set := os.LookupEnv(name); set {
			t.Skipf("%s is set in this environment: the example config would not use placeholders", name)
		}
	}
	t.Run("placeholders_exempt", func(t *testing.T) {
		g := startGateway(t, gatewayOptions{ConfigYAML: string(example), Args: []string{"--simulate"}})
		out := g.Output.String()
		if !strings.Contains(out, "placeholder sim-SEARCH_APP_KEY") {
			t.Fatalf("the example config did not run on placeholders:\n%s", out)
		}
		if strings.Contains(out, "weak local key") {
			t.Errorf("placeholders were warned about:\n%s", out)
		}
	})
	t.Run("short_key_warned", func(t *testing.T) {
		const short = "mg-short-chat-key"
		g := startGateway(t, gatewayOptions{ConfigYAML: string(example), Args: []string{"--simulate"},
			Env: map[string]string{"CHAT_APP_KEY": short}})
		out := g.Output.String()
		if !strings.Contains(out, "weak local key") || !strings.Contains(out, "is 17 characters long") {
			t.Errorf("no warning about the 17-character key:\n%s", out)
		}
		g.assertNoSecret(t, short)
	})
}

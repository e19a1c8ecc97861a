package admin

import (
	"bytes"
	"strings"
	"testing"
)

// The served page holds every view's script where its include line was, and no include line
// is left; the script's CSP hash is of the assembled script, so the browser runs it (the
// browser test shows it does).
func TestDashboardAssembled(t *testing.T) {
	if bytes.Contains(dashboardHTML, []byte("@include")) {
		t.Fatal("an include line was left in the page")
	}
	for _, name := range []string{"alerts.js", "attribution.js", "audit.js", "health.js", "teams.js", "chart.js", "keys.js"} {
		view, err := uiFiles.ReadFile("ui/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(dashboardHTML, bytes.TrimRight(view, "\n")) {
			t.Errorf("the page does not hold %s", name)
		}
	}
	if !strings.Contains(dashboardCSP, inlineHash("script")) {
		t.Errorf("the CSP does not name the assembled script's hash")
	}
}

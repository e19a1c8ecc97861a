package metrics

import (
	"strings"
	"testing"

	"modelgate/config"
)

func labelConfig() *config.Config {
	return &config.Config{
		Models: []config.Model{{ID: "gpt-4o-mini", Upstream: "sim-chat"}, {ID: "sim-slow"}},
		Teams: []config.Team{
			{Name: "alpha", Keys: []config.Key{{Name: "alpha-1"}, {Name: "alpha-2"}}},
			{Name: "beta", Keys: []config.Key{{Name: "beta-1"}}},
		},
	}
}

func TestModelLabel(t *testing.T) {
	lt := newLabelTable(labelConfig())
	for _, tc := range []struct{ in, want string }{
		{"gpt-4o-mini", "gpt-4o-mini"},
		{"sim-slow", "sim-slow"},
		{"sim-chat", "other"}, // an upstream name is not a client-facing id
		{"GPT-4O-MINI", "other"},
		{"", ""},
		{strings.Repeat("x", 10000), "other"},
	} {
		if got := lt.model(tc.in); got != tc.want {
			t.Errorf("model(%.20q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTeamAndKeyLabels(t *testing.T) {
	lt := newLabelTable(labelConfig())
	for _, tc := range []struct {
		name               string
		team, key          string
		wantTeam, wantKeyL string
	}{
		{"configured", "alpha", "alpha-1", "alpha", "alpha-1"},
		{"key_of_other_team", "alpha", "beta-1", "alpha", ""},
		{"unknown_team", "gamma", "gamma-1", "", ""},
		{"passthrough", "", "passthrough", "", "passthrough"},
		{"passthrough_any_name", "", "caller-abc", "", "passthrough"},
		{"admin", "", "admin", "", "admin"},
		{"unauthenticated", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lt.team(tc.team); got != tc.wantTeam {
				t.Errorf("team(%q) = %q, want %q", tc.team, got, tc.wantTeam)
			}
			if got := lt.key(tc.team, tc.key); got != tc.wantKeyL {
				t.Errorf("key(%q, %q) = %q, want %q", tc.team, tc.key, got, tc.wantKeyL)
			}
		})
	}
}

func TestNilConfigFoldsEverything(t *testing.T) {
	lt := newLabelTable(nil)
	if lt.model("sim-chat") != "other" || lt.team("alpha") != "" || lt.key("alpha", "alpha-1") != "" {
		t.Error("with no config every name should fold into its catch-all")
	}
}

func TestRouteStatusWord(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/v1/chat/completions", "/v1/chat/completions"},
		{"/api/open/v2/assets/:asset_id", "/api/open/v2/assets/:asset_id"},
		{"", "unknown"},
		{"unknown", "unknown"},
		{"v1/raw", "other"},
		{"/" + strings.Repeat("a", 100), "other"},
	} {
		if got := route(tc.in); got != tc.want {
			t.Errorf("route(%.20q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   int
		want string
	}{{200, "200"}, {499, "499"}, {0, "0"}, {-1, "0"}, {600, "0"}, {99, "0"}} {
		if got := status(tc.in); got != tc.want {
			t.Errorf("status(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"requests_per_minute", "requests_per_minute"},
		{"status_5xx", "status_5xx"},
		{"", "other"},
		{"Dial Error", "other"},
		{"key=sk-123", "other"},
		{strings.Repeat("a", 49), "other"},
	} {
		if got := word(tc.in); got != tc.want {
			t.Errorf("word(%.20q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

package auth

import (
	"strings"
	"testing"
	"time"

	"modelgate/config"
)

// TestRuntimeTeamKeys: a key issued to a runtime team runs as that team, with its limits,
// models and end-user limits and the config's default platform key; it stops working when
// the team goes, and a replaced team's new limits apply to the next call.
func TestRuntimeTeamKeys(t *testing.T) {
	a, is := issuedAuth(t, time.Now)
	is.ReplaceTeams([]RuntimeTeam{{Name: "growth", Models: []string{"m1"}, Limits: config.Limits{SpendPerDay: 3, OnBudgetExceeded: "clamp"},
		EndUserLimits: config.EndUserLimits{RequestsPerMinute: 2}}})
	if err := is.Replace([]IssuedKey{{ID: "k1", Team: "growth", Name: "bot", SHA256: hexSum("mg-runtime-1"), Limits: config.Limits{RequestsPerMinute: 4}}}); err != nil {
		t.Fatal(err)
	}
	if !a.HasTeam("growth") || a.HasTeam("nobody") || !a.HasTeam("alpha") {
		t.Fatal("HasTeam")
	}
	p, err := a.Authenticate("Bearer mg-runtime-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Team != "growth" || p.TeamScopeID != "team:growth" || p.ScopeID != "key:growth/bot" || p.TeamLimits.SpendPerDay != 3 ||
		p.TeamLimits.OnBudgetExceeded != "clamp" || p.KeyLimits.RequestsPerMinute != 4 || p.EndUserLimits.RequestsPerMinute != 2 ||
		p.PlatformKey.Reveal() != "sk-platform" || !p.AllowsModel("m1") || p.AllowsModel("m2") || p.Shadow {
		t.Fatalf("principal %+v", p)
	}
	is.ReplaceTeams([]RuntimeTeam{{Name: "growth", Limits: config.Limits{SpendPerDay: 0.5}}})
	if p, _ := a.Authenticate("Bearer mg-runtime-1"); p == nil || p.TeamLimits.SpendPerDay != 0.5 || !p.AllowsModel("m2") {
		t.Fatalf("after the team changed: %+v", p)
	}
	is.ReplaceTeams(nil)
	if _, err := a.Authenticate("Bearer mg-runtime-1"); err != ErrUnknown {
		t.Fatalf("a key of a deleted team: %v, want ErrUnknown", err)
	}
	if a.HasTeam("growth") {
		t.Fatal("a deleted team can still hold keys")
	}
}

// TestRuntimeTeamsNeedADefaultPlatformKey: without a default platform key, or in passthrough
// mode, runtime teams cannot be served and say why.
func TestRuntimeTeamsNeedADefaultPlatformKey(t *testing.T) {
	cfg := issuedConfig(t)
	cfg.Upstream.APIKey = ""
	for i := range cfg.Teams {
		cfg.Teams[i].UpstreamAPIKey = "sk-own"
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	is := NewIssued(nil)
	a.UseIssued(is)
	is.ReplaceTeams([]RuntimeTeam{{Name: "growth"}})
	if a.HasTeam("growth") || !strings.Contains(a.RuntimeTeamsProblem(), "default platform key") {
		t.Fatalf("served a runtime team without a platform key: %q", a.RuntimeTeamsProblem())
	}
	pass := config.Default()
	pass.Upstream.APIKey = "sk-platform"
	b, err := New(pass)
	if err != nil {
		t.Fatal(err)
	}
	b.UseIssued(is)
	if b.HasTeam("growth") || !strings.Contains(b.RuntimeTeamsProblem(), "passthrough") {
		t.Fatalf("passthrough: %q", b.RuntimeTeamsProblem())
	}
	if ok, _ := issuedAuth(t, nil); ok.RuntimeTeamsProblem() != "" {
		t.Fatal("a keys-mode config with a default platform key")
	}
}

// TestClashWithRuntimeTeam: a config that adds a team named like a runtime team is refused.
func TestClashWithRuntimeTeam(t *testing.T) {
	_, is := issuedAuth(t, nil)
	cfg := issuedConfig(t)
	if err := is.Clash(cfg); err != nil {
		t.Fatal(err)
	}
	is.ReplaceTeams([]RuntimeTeam{{Name: "beta"}})
	if err := is.Clash(cfg); err == nil || !strings.Contains(err.Error(), `team "beta"`) {
		t.Fatalf("clash: %v", err)
	}
}

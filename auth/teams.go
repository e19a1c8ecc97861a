package auth

import (
	"fmt"
	"sort"

	"modelgate/config"
)

// RuntimeTeam is a team created at run time through the admin API (issue 45). It has no
// keys of its own in the config: its keys are issued ones, and its calls go with the
// config's default platform keys (upstream.api_key or upstream.api_keys, as upstream's
// runtime pool; the principal carries the first).
type RuntimeTeam struct {
	Name          string
	Models        []string // allow-list of client-facing model ids; empty = all
	Limits        config.Limits
	EndUserLimits config.EndUserLimits
}

// teamSet is one generation of runtime teams, replaced whole like the issued keys.
type teamSet map[string]*RuntimeTeam

// ReplaceTeams swaps in a new set of runtime teams. Each team's model list is copied, so
// the caller's slices may change afterwards.
func (is *Issued) ReplaceTeams(teams []RuntimeTeam) {
	set := make(teamSet, len(teams))
	for _, t := range teams {
		t.Models = keyModels(t.Models)
		set[t.Name] = &t
	}
	is.teams.Store(&set)
}

// RuntimeTeam returns the runtime team of that name, if there is one. Its Models slice is
// shared: treat it as read-only.
func (is *Issued) RuntimeTeam(name string) (RuntimeTeam, bool) {
	set := is.teams.Load()
	if set == nil {
		return RuntimeTeam{}, false
	}
	t, ok := (*set)[name]
	if !ok {
		return RuntimeTeam{}, false
	}
	return *t, true
}

// RuntimeTeams lists the runtime teams in name order.
func (is *Issued) RuntimeTeams() []RuntimeTeam {
	set := is.teams.Load()
	if set == nil {
		return nil
	}
	out := make([]RuntimeTeam, 0, len(*set))
	for _, t := range *set {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// runtimePrincipal is the keyless principal of a runtime team under this config, or false
// when there is no such team or it cannot be served: in passthrough mode callers bring their
// own platform keys, and without a default platform key a runtime team has none to use.
func (a *Authenticator) runtimePrincipal(team string) (*Principal, bool) {
	if a.issued == nil || a.mode != ModeKeys || a.runtimeKey == "" {
		return nil, false
	}
	t, ok := a.issued.RuntimeTeam(team)
	if !ok {
		return nil, false
	}
	return &Principal{Team: t.Name, TeamScopeID: "team:" + t.Name, PlatformKey: a.runtimeKey,
		TeamLimits: t.Limits, Models: t.Models, EndUserLimits: t.EndUserLimits, Runtime: true}, true
}

// RuntimeTeamsProblem says why this config cannot serve runtime teams, or "" when it can.
func (a *Authenticator) RuntimeTeamsProblem() string {
	switch {
	case a.mode != ModeKeys:
		return "This modelgate runs in passthrough mode (no team keys in its config): callers bring their own platform keys, so a team would have none."
	case a.runtimeKey == "":
		return "The config has no default platform key (upstream.api_key or upstream.api_keys) for a team created at run time to call with."
	}
	return ""
}

// teamClash names the first team of cfg a runtime team already has the name of, or nil:
// the two would share one limit scope ("team:<name>") and one spend budget.
func (is *Issued) teamClash(cfg *config.Config) error {
	set := is.teams.Load()
	if set == nil {
		return nil
	}
	for _, t := range cfg.Teams {
		if _, ok := (*set)[t.Name]; ok {
			return fmt.Errorf("team %q is also the name of a team created through the admin API; "+
				"rename the config team or delete the runtime one (they would share one limit scope)", t.Name)
		}
	}
	return nil
}

// defaultPlatformKey is the platform key a runtime team's calls go with: the first key a
// team without keys of its own would get.
func defaultPlatformKey(cfg *config.Config) Secret {
	pool := cfg.TeamPlatformKeys(&config.Team{})
	if len(pool) == 0 || config.TokenProblem(pool[0]) != "" {
		return ""
	}
	return Secret(pool[0])
}

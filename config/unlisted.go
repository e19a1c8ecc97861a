package config

import (
	"fmt"
	"strings"
)

// Values of Limits.UnlistedModels.
const (
	UnlistedRefuse = "refuse"
	UnlistedAllow  = "allow"
)

// RefusesUnlisted reports whether a call naming a model no models[] entry names is refused:
// limits.unlisted_models when set; otherwise refused when team keys are configured (a team's
// allow-list, prices, limits and calibration hang on an entry, so a name without one would
// escape them) and allowed in passthrough mode, where callers bring their own platform keys.
func (c *Config) RefusesUnlisted() bool {
	if c.Limits.UnlistedModels != "" {
		return c.Limits.UnlistedModels == UnlistedRefuse
	}
	return c.KeysMode()
}

// PlatformOwners maps each platform model a models[] entry sends calls to (its upstream, by
// default its id, or one of its routes' targets) to the ids of the entries that send there,
// in config order. A name that is itself an entry's id is that entry and is left out: a
// call naming it is that entry already.
func PlatformOwners(models []Model) map[string][]string {
	ids := make(map[string]bool, len(models))
	for _, m := range models {
		ids[m.ID] = true
	}
	out := map[string][]string{}
	add := func(name, id string) {
		if name == "" || ids[name] {
			return
		}
		for _, have := range out[name] {
			if have == id {
				return
			}
		}
		out[name] = append(out[name], id)
	}
	for _, m := range models {
		add(m.Upstream, m.ID)
		for _, r := range m.Routes {
			add(r.Upstream, m.ID)
		}
	}
	return out
}

// unlistedModels checks limits.unlisted_models, and refuses a config that would refuse
// every model call: no models listed, and unlisted models refused (the default with team
// keys).
func (v *validator) unlistedModels(c *Config) {
	v.either("limits.unlisted_models", c.Limits.UnlistedModels, UnlistedRefuse, UnlistedAllow)
	switch {
	case len(c.Models) > 0 || !c.RefusesUnlisted():
	case c.Limits.UnlistedModels == "":
		v.fail("models", "no models are listed, so with team keys every model call would be refused "+
			"(limits.unlisted_models defaults to refuse when teams are configured): list the models teams may call, "+
			"or set limits.unlisted_models: allow")
	default:
		v.fail("limits.unlisted_models", "refuse with no models listed would refuse every model call: list the models callers may call")
	}
}

// ModelWarnings lists what `modelgate check` should say of how model names resolve: a
// platform model several entries send to (a call naming it is charged as the first), and
// unlisted models allowed where a spend budget cannot price them.
func (c *Config) ModelWarnings() []string {
	var out []string
	owners := PlatformOwners(c.Models)
	for _, m := range c.Models {
		for _, name := range append([]string{m.Upstream}, routeTargets(m)...) {
			ids := owners[name]
			if len(ids) > 1 && ids[0] == m.ID {
				out = append(out, fmt.Sprintf("models %s all send calls to platform model %s: a call naming %s is "+
					"taken as %s (the first listed), with its allow-list, price, limits and calibration; "+
					"give %s an entry of its own to decide otherwise", strings.Join(ids, ", "), name, name, ids[0], name))
			}
		}
	}
	if c.RefusesUnlisted() {
		return out
	}
	for _, t := range c.Teams {
		if hasSpend(t.Limits) || keysHaveSpend(t.Keys) {
			out = append(out, fmt.Sprintf("limits.unlisted_models is allow and team %s has a spend limit: a call naming a model "+
				"no entry lists has no price, so it costs nothing against it", t.Name))
		}
	}
	if !c.KeysMode() && (hasSpend(c.Limits) || hasSpend(c.Ratelimit.PassthroughLimits)) {
		out = append(out, "limits.unlisted_models is allow and passthrough callers have a spend limit: a call naming a model "+
			"no entry lists has no price, so it costs nothing against it")
	}
	return out
}

func routeTargets(m Model) []string {
	out := make([]string, len(m.Routes))
	for i, r := range m.Routes {
		out[i] = r.Upstream
	}
	return out
}

func hasSpend(l Limits) bool { return l.SpendPerDay > 0 || l.SpendPerMonth > 0 }

func keysHaveSpend(keys []Key) bool {
	for _, k := range keys {
		if hasSpend(k.Limits) {
			return true
		}
	}
	return false
}

// ModelIDs are the client-facing model ids, in config order.
func (c *Config) ModelIDs() []string {
	ids := make([]string, len(c.Models))
	for i, m := range c.Models {
		ids[i] = m.ID
	}
	return ids
}

package tests

import (
	"cmp"
	"fmt"
	"strings"
)

// gatewayYAML is the config an end-to-end test starts modelgate with. Every test's config has
// the same frame (the simulated platform upstream, reached with the platform key from the
// environment; a ratelimit section; a team list), so the frame is written here once and each
// test names only what is its own.
type gatewayYAML struct {
	upstream  string // more lines of the upstream section, each indented two spaces
	models    string // the models section's entries; none leaves the section out
	ratelimit string // the ratelimit section's entries; "" keeps state in ./data
	teams     string // the team list's entries
	more      string // further top-level sections, after teams
}

// render returns the config text with p as the upstream. Tests that edit the text of
// keysConfig (withTeams, withoutBeta, the health test) rely on this layout: upstream's
// api_key line, then models, ratelimit, teams and the further sections, in that order.
func (c gatewayYAML) render(p *platform) string {
	var b strings.Builder
	fmt.Fprintf(&b, "upstream:\n  gateway_url: %s\n  base_url: %s\n  api_key: ${PLATFORM_API_KEY}\n", p.URL, p.URL)
	b.WriteString(c.upstream)
	if c.models != "" {
		b.WriteString("models:\n" + c.models)
	}
	b.WriteString("ratelimit:\n" + cmp.Or(c.ratelimit, "  data_path: data\n") + "teams:\n")
	b.WriteString(c.teams)
	b.WriteString(c.more)
	return b.String()
}

// chatAlias is the model entry most tests call: gpt-4o-mini, answered by the platform's
// sim-chat, so the OpenAI SDKs' default model name works.
const chatAlias = "  - id: gpt-4o-mini\n    upstream: sim-chat\n"

// adminKeys is the section that lets adminKey call the admin API.
const adminKeys = "admin_keys: [${ADMIN_KEY}]\n"

// alphaTeam is team alpha with its one key alpha-1 (ALPHA_KEY in the environment); limits,
// if not empty, are the team's limits as a YAML flow map ("{requests_per_minute: 1}").
func alphaTeam(limits string) string {
	var b strings.Builder
	b.WriteString("  - name: alpha\n")
	if limits != "" {
		b.WriteString("    limits: " + limits + "\n")
	}
	b.WriteString("    keys:\n      - name: alpha-1\n        key: ${ALPHA_KEY}\n")
	return b.String()
}

// spentTeam is a team whose small daily token budget one answer uses up (SPENT_KEY in the
// environment).
const spentTeam = `  - name: spent
    limits: { tokens_per_day: 100 }
    keys:
      - name: spent-1
        key: ${SPENT_KEY}
`

package config

import (
	"reflect"
	"strings"
	"testing"

	"modelgate/apitest"
)

func TestUnlistedModels(t *testing.T) {
	const team = "teams:\n  - name: search\n    keys: [{name: prod, key: mg-search-prod}]\n"
	const models = "models: [{id: m}]\n"
	for _, tc := range []struct {
		name, yaml string
		refuses    bool
		bad        string // a part of the error; "" = valid
	}{
		{"passthrough allows by default", "listen: 127.0.0.1:1\n", false, ""},
		{"passthrough may refuse", models + "limits: {unlisted_models: refuse}\n", true, ""},
		{"refusing with no models refuses everything", "limits: {unlisted_models: refuse}\n", false, "limits.unlisted_models: refuse with no models listed"},
		{"team keys refuse by default", "upstream: {api_key: sk-p}\n" + models + team, true, ""},
		{"team keys may allow", "upstream: {api_key: sk-p}\nlimits: {unlisted_models: allow}\n" + models + team, false, ""},
		{"team keys without models may allow", "upstream: {api_key: sk-p}\nlimits: {unlisted_models: allow}\n" + team, false, ""},
		{"team keys without models refuse everything", "upstream: {api_key: sk-p}\n" + team, false, "models: no models are listed"},
		{"an unknown value", "limits: {unlisted_models: maybe}\n", false, "limits.unlisted_models"},
		{"not on a team", "upstream: {api_key: sk-p}\n" + models + team + "    limits: {unlisted_models: allow}\n", false, "teams[0].limits.unlisted_models: set it at the top-level limits"},
		{"not on a key", "upstream: {api_key: sk-p}\n" + models + "teams:\n  - name: search\n    keys: [{name: prod, key: mg-search-prod, limits: {unlisted_models: allow}}]\n", false, "teams[0].keys[0].limits.unlisted_models"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml), "c.yaml", nil)
			if apitest.ErrWanted(t, err, tc.bad) {
				return
			}
			if got := cfg.RefusesUnlisted(); got != tc.refuses {
				t.Errorf("RefusesUnlisted() = %v, want %v", got, tc.refuses)
			}
			want := "unlisted models: allowed"
			if tc.refuses {
				want = "unlisted models: refused"
			}
			summaryHas(t, cfg.Summary(), want)
		})
	}
}

func TestPlatformOwners(t *testing.T) {
	got := PlatformOwners([]Model{
		{ID: "expensive", Upstream: "vendor-expensive"},
		{ID: "cheap", Upstream: "vendor-cheap"},
		{ID: "also-cheap", Upstream: "vendor-cheap"},
		{ID: "canary", Routes: []Route{{Upstream: "vendor-a", Weight: 9}, {Upstream: "vendor-cheap", Weight: 1}}},
		{ID: "plain"},                           // its own upstream: already an id
		{ID: "alias", Upstream: "plain"},        // an id: a call naming it is that entry
		{ID: "vendor-a", Upstream: "vendor-a2"}, // the id vendor-a is not canary's
	})
	want := map[string][]string{
		"vendor-expensive": {"expensive"},
		"vendor-cheap":     {"cheap", "also-cheap", "canary"},
		"vendor-a2":        {"vendor-a"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PlatformOwners = %v, want %v", got, want)
	}
}

func TestModelWarnings(t *testing.T) {
	const priced = "upstream: {api_key: sk-p}\nmodels:\n  - {id: expensive, upstream: vendor-expensive, price: {input: 10, output: 30}}\n"
	const spender = "teams:\n  - name: search\n    limits: {spend_per_day: 5}\n    keys: [{name: prod, key: mg-search-prod}]\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string // parts of the warnings, in order
	}{
		{"refused: nothing to say", priced + spender, nil},
		{"allowed with a spend budget", priced + "limits: {unlisted_models: allow}\n" + spender,
			[]string{"limits.unlisted_models is allow and team search has a spend limit"}},
		{"allowed with a key's spend budget", priced + "limits: {unlisted_models: allow}\n" +
			"teams:\n  - name: search\n    keys: [{name: prod, key: mg-search-prod, limits: {spend_per_month: 5}}]\n",
			[]string{"team search has a spend limit"}},
		{"allowed without a spend budget", priced + "limits: {unlisted_models: allow}\n" +
			"teams:\n  - name: search\n    keys: [{name: prod, key: mg-search-prod}]\n", nil},
		{"passthrough with a spend budget", "limits: {spend_per_day: 5}\n",
			[]string{"passthrough callers have a spend limit"}},
		{"two entries send to one platform model", priced + "  - {id: cheap, upstream: vendor-x}\n  - {id: dear, upstream: vendor-x}\n" + spender,
			[]string{"models cheap, dear all send calls to platform model vendor-x: a call naming vendor-x is taken as cheap"}},
		{"an entry of its own settles it", priced + "  - {id: cheap, upstream: vendor-x}\n  - {id: dear, upstream: vendor-x}\n  - {id: vendor-x}\n" + spender, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, []byte(tc.yaml), "c.yaml", nil)
			got := cfg.ModelWarnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings = %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestModelIDs(t *testing.T) {
	c := &Config{Models: []Model{{ID: "big", Upstream: "sim-big"}, {ID: "small"}}}
	if got := c.ModelIDs(); len(got) != 2 || got[0] != "big" || got[1] != "small" {
		t.Fatalf("%v", got)
	}
	if got := (&Config{}).ModelIDs(); len(got) != 0 {
		t.Fatalf("no models: %v", got)
	}
}

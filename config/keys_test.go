package config

import (
	"slices"
	"strings"
	"testing"
)

func TestPlatformKeyPoolErrors(t *testing.T) {
	team := "teams:\n  - name: search\n    keys: [{name: a, key: mg-a}]\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"team_both", team + "    upstream_api_key: sk-1\n    upstream_api_keys: [sk-2, sk-3]\n",
			"c.yaml:5: teams[0].upstream_api_keys: set teams[0].upstream_api_key or teams[0].upstream_api_keys, not both"},
		{"upstream_both", "upstream:\n  api_key: sk-1\n  upstream_api_keys: [sk-2]\n" + team,
			"upstream.upstream_api_keys: set upstream.api_key or upstream.upstream_api_keys, not both"},
		{"team_duplicate", team + "    upstream_api_keys: [sk-2, sk-2]\n",
			"teams[0].upstream_api_keys[1]: the same platform key is listed twice (also teams[0].upstream_api_keys[0])"},
		{"team_malformed", team + "    upstream_api_keys: [sk-2, \"has space\"]\n", "teams[0].upstream_api_keys[1]:"},
		{"team_empty_entry", team + "    upstream_api_keys: [\"${EMPTY}\"]\n", "teams[0].upstream_api_keys[0]: is empty (environment variable EMPTY is set but empty)"},
	}
	env := func(k string) (string, bool) { return "", k == "EMPTY" }
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yaml", env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
			for _, k := range []string{"sk-1", "sk-2", "sk-3"} {
				if strings.Contains(err.Error(), k) {
					t.Errorf("error echoes key %s: %v", k, err)
				}
			}
		})
	}
}

func TestTeamPlatformKeys(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"team_list", "models: [{id: m}]\nteams:\n  - name: a\n    upstream_api_keys: [sk-1, sk-2]\n    keys: [{name: a, key: mg-a}]\n", []string{"sk-1", "sk-2"}},
		{"team_single", "models: [{id: m}]\nupstream:\n  upstream_api_keys: [sk-d1, sk-d2]\nteams:\n  - name: a\n    upstream_api_key: sk-1\n    keys: [{name: a, key: mg-a}]\n", []string{"sk-1"}},
		{"default_list", "models: [{id: m}]\nupstream:\n  upstream_api_keys: [sk-d1, sk-d2]\nteams:\n  - name: a\n    keys: [{name: a, key: mg-a}]\n", []string{"sk-d1", "sk-d2"}},
		{"default_single", "models: [{id: m}]\nupstream:\n  api_key: sk-d\nteams:\n  - name: a\n    keys: [{name: a, key: mg-a}]\n", []string{"sk-d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, []byte(tc.yaml), "c.yaml", nil)
			if got := cfg.TeamPlatformKeys(&cfg.Teams[0]); !slices.Equal(got, tc.want) {
				t.Errorf("keys = %v, want %v", got, tc.want)
			}
			if s := cfg.Summary(); strings.Contains(s, "sk-") {
				t.Errorf("summary shows a key:\n%s", s)
			}
		})
	}
}

func TestRedisBlock(t *testing.T) {
	cases := []struct {
		name, yaml, want string // want "" = valid
	}{
		{"single", "ratelimit:\n  store: redis\n  redis:\n    addrs: [10.0.0.5:6379]\n    password: pw-secret\n", ""},
		{"cluster", "ratelimit:\n  store: redis\n  redis:\n    addrs: [a:7000, b:7001, c:7002]\n    cluster: true\n", ""},
		{"sentinel", "ratelimit:\n  store: redis\n  redis:\n    addrs: [a:26379, b:26379]\n    sentinel_master: mymaster\n    db: 2\n", ""},
		{"url_still_works", "ratelimit:\n  store: redis://127.0.0.1:6379/0\n", ""},
		{"no_addrs", "ratelimit:\n  store: redis\n", "ratelimit.redis.addrs: store: redis needs at least one host:port"},
		{"bad_addr", "ratelimit:\n  store: redis\n  redis:\n    addrs: [nohost]\n", `ratelimit.redis.addrs[0]: want host:port, got "nohost"`},
		{"both_modes", "ratelimit:\n  store: redis\n  redis:\n    addrs: [a:1]\n    cluster: true\n    sentinel_master: m\n", "set cluster or sentinel_master, not both"},
		{"cluster_db", "ratelimit:\n  store: redis\n  redis:\n    addrs: [a:1]\n    cluster: true\n    db: 1\n", "Redis Cluster has only database 0"},
		{"several_plain", "ratelimit:\n  store: redis\n  redis:\n    addrs: [a:1, b:2]\n", "several addresses need cluster: true or sentinel_master"},
		{"block_without_store", "ratelimit:\n  store: redis://u:pw-secret@h:1/0\n  redis:\n    addrs: [a:1]\n", "ratelimit.redis: is used only with store: redis"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml), "c.yaml", nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(cfg.Summary(), "pw-secret") {
					t.Errorf("summary shows the password:\n%s", cfg.Summary())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw-secret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

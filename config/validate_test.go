package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// keyed is a minimal valid keys-mode config; cases append or replace parts of it.
const keyed = `upstream:
  api_key: sk-platform
teams:
  - name: search
    keys:
      - name: prod
        key: mg-search-prod
`

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // every substring must appear in the error
	}{
		// structure and types
		{"syntax", "listen: [\n", []string{"c.yaml:", "YAML syntax"}},
		{"top_level_list", "- a\n", []string{"c.yaml:1: want a mapping of keys at the top level"}},
		{"two_documents", "listen: a:1\n---\nlisten: b:2\n", []string{"c.yaml:2: only one YAML document"}},
		{"unknown_top", "listen: 127.0.0.1:1\nlisten_addr: x\n", []string{"c.yaml:2: listen_addr: unknown key"}},
		{"unknown_nested", keyed + "    modles: [a]\n", []string{"c.yaml:8: teams[0].modles: unknown key"}},
		{"unknown_suggests", "upstream:\n  gateway-url: https://a.example\n", []string{`upstream.gateway-url: unknown key (did you mean "gateway_url"?)`}},
		{"unknown_in_key", keyed + "        secret: x\n", []string{"c.yaml:8: teams[0].keys[0].secret: unknown key"}},
		{"duplicate_key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", []string{"c.yaml:2: listen: duplicate key (first set on line 1)"}},
		{"duplicate_nested", "upstream:\n  api_key: a\n  api_key: b\n", []string{"c.yaml:3: upstream.api_key: duplicate key"}},
		{"string_got_list", "listen: [a]\n", []string{"c.yaml:1: listen: want a single value, got a list"}},
		{"struct_got_scalar", "upstream: https://x\n", []string{"c.yaml:1: upstream: want a mapping of keys"}},
		{"list_got_scalar", "models: gpt-4o\n", []string{"c.yaml:1: models: want a list"}},
		{"int_got_word", "limits:\n  requests_per_minute: lots\n", []string{`c.yaml:2: limits.requests_per_minute: want a whole number, got "lots"`}},
		{"int_got_float", "limits:\n  tokens_per_day: 1.5\n", []string{"limits.tokens_per_day: want a whole number"}},
		{"duration_bare_number", "upstream:\n  dial_timeout: 30\n", []string{`c.yaml:2: upstream.dial_timeout: want a duration such as "30s"`}},
		{"bool_got_word", "translate:\n  drop_extra_fields: sometimes\n", []string{"translate.drop_extra_fields: want true or false"}},
		{"alias", "upstream:\n  api_key: &k abc\nadmin_keys: [*k]\n", []string{"anchors and aliases are not supported"}},
		{"merge_key", "base: &b {listen: x}\n<<: *b\n", []string{"base: unknown key"}},
		{"custom_tag", "listen: !host 127.0.0.1:1\n", []string{"c.yaml:1: listen: YAML tag !host is not supported"}},
		{"binary_tag", "upstream:\n  api_key: !!binary aGVsbG8=\n", []string{"upstream.api_key: YAML tag !!binary is not supported"}},
		{"complex_key", "? [a]\n: b\n", []string{"keys must be plain names"}},

		// fallbacks (issue 27)
		{"fallback_self", "models:\n  - id: a\n    fallbacks: [a]\n", []string{"models[0].fallbacks[0]: a model cannot fall back to itself"}},
		{"fallback_unknown", "models:\n  - id: a\n    fallbacks: [b]\n", []string{`models[0].fallbacks[0]: unknown model id "b"`}},
		{"fallback_twice", "models:\n  - id: a\n    fallbacks: [b, b]\n  - id: b\n", []string{`models[0].fallbacks[1]: "b" is listed twice`}},
		{"context_window_negative", "models:\n  - id: a\n    context_window: -1\n", []string{"models[0].context_window: must not be negative"}},
		{"first_token_timeout_negative", "models:\n  - id: a\n    first_token_timeout: -1s\n", []string{"models[0].first_token_timeout: must not be negative"}},
		{"retries_negative", "models:\n  - id: a\n    retries: -1\n", []string{"models[0].retries: must be between 0 and 10, got -1"}},
		{"retries_too_many", "models:\n  - id: a\n    retries: 11\n", []string{"models[0].retries: must be between 0 and 10, got 11"}},
		{"compact_instructions_blank", "models:\n  - id: a\n    compact_instructions: \"  \"\n", []string{"models[0].compact_instructions: is blank"}},
		{"compact_instructions_too_long", "models:\n  - id: a\n    compact_instructions: " + strings.Repeat("x", 32<<10+1) + "\n", []string{"models[0].compact_instructions: is 32769 bytes long, more than 32768"}},
		{"server_tools", "translate:\n  server_tools: keep\n", []string{"translate.server_tools: want drop or refuse, got \"keep\""}},

		// environment
		{"env_unset", strings.Replace(keyed, "mg-search-prod", "${UNSET_APP_KEY}", 1), []string{"c.yaml:7: teams[0].keys[0].key: environment variable UNSET_APP_KEY is not set"}},
		{"env_unset_in_flow_list", "admin_keys: [${UNSET_ADMIN}]\n", []string{"c.yaml:1: admin_keys[0]: environment variable UNSET_ADMIN is not set"}},
		{"env_reserved_marker", "listen: .mg-env-Q7z.X.\n", []string{"c.yaml: the file contains", "reserves"}},
		{"env_all_unset_named", "upstream:\n  gateway_url: ${GW}\n  base_url: ${BASE}\n", []string{"c.yaml:2: environment variables are not set: GW (line 2), BASE (line 3)"}},
		{"env_unterminated", "upstream:\n  api_key: ${KEY\n", []string{"upstream.api_key: unterminated ${"}},
		{"env_empty_secret", strings.Replace(keyed, "mg-search-prod", "${EMPTY}", 1), []string{"teams[0].keys[0].key: set key or key_sha256 (environment variable EMPTY is set but empty)"}},
		{"env_empty_admin", "admin_keys: [\"${EMPTY}\"]\n", []string{"admin_keys[0]: is empty (environment variable EMPTY is set but empty)"}},

		// URLs and addresses
		{"listen_no_port", "listen: localhost\n", []string{"c.yaml:1: listen: want host:port"}},
		{"listen_bad_port", "listen: 127.0.0.1:http\n", []string{"listen: want a port number"}},
		{"gateway_relative", "upstream:\n  gateway_url: gateway.example.com\n", []string{"c.yaml:2: upstream.gateway_url: want an absolute http:// or https:// URL"}},
		{"gateway_ftp", "upstream:\n  gateway_url: ftp://gateway.example.com\n", []string{"upstream.gateway_url: want an absolute http"}},
		{"gateway_no_host", "upstream:\n  gateway_url: 'https://'\n", []string{"upstream.gateway_url: URL has no host"}},
		{"gateway_userinfo", "upstream:\n  gateway_url: https://user:pw@gw.example.com\n", []string{"upstream.gateway_url: URL must not contain user info"}},
		{"base_query", "upstream:\n  base_url: https://p.example.com/?key=x\n", []string{"upstream.base_url: URL must not have a query"}},
		{"base_fragment", "upstream:\n  base_url: https://p.example.com/#x\n", []string{"upstream.base_url: URL must not have a fragment"}},
		{"store_scheme", "ratelimit:\n  store: mysql://db\n", []string{"c.yaml:2: ratelimit.store: want memory, redis://"}},
		{"store_no_host", "ratelimit:\n  store: redis://\n", []string{"ratelimit.store", "no host"}},
		{"store_bad_db", "ratelimit:\n  store: redis://r:6379/zero\n", []string{"ratelimit.store", "database must be a number"}},
		{"store_secret_not_echoed", "ratelimit:\n  store: 'mysql://u:hunter2@db'\n", []string{"ratelimit.store"}},

		// enumerations and limits
		{"on_store_error", "ratelimit:\n  on_store_error: maybe\n", []string{`ratelimit.on_store_error: want allow or deny, got "maybe"`}},
		{"on_budget_exceeded", "limits:\n  on_budget_exceeded: shrink\n", []string{`c.yaml:2: limits.on_budget_exceeded: want refuse or clamp, got "shrink"`}},
		{"team_on_budget_exceeded", keyed + "    limits: {on_budget_exceeded: Clamp}\n", []string{`c.yaml:8: teams[0].limits.on_budget_exceeded: want refuse or clamp, got "Clamp"`}},
		{"key_on_budget_exceeded", keyed + "        limits:\n          on_budget_exceeded: clamp\n", []string{"c.yaml:9: teams[0].keys[0].limits.on_budget_exceeded: set it at limits or teams[].limits"}},
		{"passthrough_on_budget_exceeded", "ratelimit:\n  passthrough_limits: {on_budget_exceeded: clamp}\n", []string{"ratelimit.passthrough_limits.on_budget_exceeded: set it at limits or teams[].limits"}},
		{"reasoning_field", "translate:\n  reasoning_field: thoughts\n", []string{"translate.reasoning_field: want reasoning_content or reasoning"}},
		{"team_mode", keyed + "    mode: audit\n", []string{"c.yaml:8: teams[0].mode: want enforce or shadow"}},
		{"negative_limit", "limits:\n  concurrent_requests: -1\n", []string{"c.yaml:2: limits.concurrent_requests: must not be negative"}},
		{"negative_team_limit", keyed + "    limits: {tokens_per_minute: -5}\n", []string{"c.yaml:8: teams[0].limits.tokens_per_minute: must not be negative"}},
		{"negative_key_limit", keyed + "        limits:\n          requests_per_day_typo: 1\n", []string{"teams[0].keys[0].limits.requests_per_day_typo: unknown key"}},
		{"negative_key_rpm", keyed + "        limits:\n          requests_per_minute: -1\n", []string{"c.yaml:9: teams[0].keys[0].limits.requests_per_minute: must not be negative"}},
		{"negative_duration", "upstream:\n  request_timeout: -1s\n", []string{"upstream.request_timeout: must not be negative"}},
		{"negative_retries", "upstream:\n  max_retries: -1\n", []string{"upstream.max_retries: must not be negative"}},
		{"negative_breaker_failures", "upstream:\n  breaker:\n    failures: -1\n", []string{"upstream.breaker.failures: must be between 0 (off) and 1000000"}},
		{"negative_breaker_cooldown", "upstream:\n  breaker:\n    cooldown: -1s\n", []string{"upstream.breaker.cooldown"}},
		{"negative_body", "server:\n  max_body_bytes: -1\n", []string{"server.max_body_bytes: must not be negative"}},
		{"negative_ttl", "sidecar:\n  balance_cache_ttl: -5s\n", []string{"sidecar.balance_cache_ttl: must not be negative"}},
		// the Responses WebSocket mode (issue 29)
		{"negative_socket_cap", "limits:\n  websocket_connections: -1\n", []string{"c.yaml:2: limits.websocket_connections: must not be negative"}},
		{"team_socket_cap", keyed + "    limits: {websocket_connections: 2}\n", []string{"c.yaml:8: teams[0].limits.websocket_connections: set it at the top-level limits"}},
		{"negative_lane_cap", "limits:\n  websocket_lanes: -1\n", []string{"c.yaml:2: limits.websocket_lanes: must not be negative"}},
		{"team_lane_cap", keyed + "    limits: {websocket_lanes: 2}\n", []string{"c.yaml:8: teams[0].limits.websocket_lanes: set it at the top-level limits"}},
		{"key_socket_cap", keyed + "        limits: {websocket_connections: 2}\n", []string{"teams[0].keys[0].limits.websocket_connections: set it at the top-level limits"}},
		{"negative_socket_age", "server:\n  websocket_max_age: -1m\n", []string{"c.yaml:2: server.websocket_max_age: must not be negative"}},
		{"negative_socket_ping", "server:\n  websocket_ping_interval: -5s\n", []string{"c.yaml:2: server.websocket_ping_interval: must not be negative"}},

		// models and allow-lists
		{"model_dup", "models:\n  - id: a\n  - id: b\n  - id: a\n", []string{"c.yaml:4: models[2].id: duplicate model id \"a\" (also models[0])"}},
		{"model_empty_id", "models:\n  - upstream: x\n", []string{"models[0].id: is empty"}},
		{"model_space", "models:\n  - id: 'gpt 4'\n", []string{"models[0].id: contains a space"}},
		{"routes_and_upstream", "models:\n  - id: a\n    upstream: x\n    routes: [{upstream: y, weight: 1}]\n", []string{"c.yaml:4: models[0].routes: set upstream or routes, not both"}},
		{"routes_empty", "models:\n  - id: a\n    routes: []\n", []string{"models[0].routes: want at least one route"}},
		{"route_weight_zero", "models:\n  - id: a\n    routes: [{upstream: x, weight: 3}, {upstream: y, weight: 0}]\n", []string{"models[0].routes[1].weight: want a whole number from 1 to 1000000, got 0"}},
		{"route_weight_missing", "models:\n  - id: a\n    routes: [{upstream: x}]\n", []string{"models[0].routes[0].weight: want a whole number"}},
		{"route_weight_negative", "models:\n  - id: a\n    routes: [{upstream: x, weight: -2}]\n", []string{"models[0].routes[0].weight: want a whole number from 1"}},
		{"route_weight_float", "models:\n  - id: a\n    routes: [{upstream: x, weight: 0.5}]\n", []string{"models[0].routes[0].weight: want a whole number"}},
		{"route_weight_huge", "models:\n  - id: a\n    routes: [{upstream: x, weight: 9000000000}]\n", []string{"models[0].routes[0].weight: want a whole number from 1 to 1000000"}},
		{"route_no_upstream", "models:\n  - id: a\n    routes: [{weight: 1}]\n", []string{"models[0].routes[0].upstream: is empty"}},
		{"route_dup", "models:\n  - id: a\n    routes: [{upstream: x, weight: 1}, {upstream: x, weight: 2}]\n", []string{`models[0].routes[1].upstream: "x" is routed twice (also routes[0])`}},
		{"route_unknown_key", "models:\n  - id: a\n    routes: [{upstream: x, weight: 1, share: 2}]\n", []string{"models[0].routes[0].share: unknown key"}},
		{"sticky_value", "models:\n  - id: a\n    routes: [{upstream: x, weight: 1}]\n    sticky: session\n", []string{`models[0].sticky: want user, conversation or empty, got "session"`}},
		{"sticky_without_routes", "models:\n  - id: a\n    sticky: user\n", []string{"models[0].sticky: sticky chooses between routes: set routes too"}},
		{"allow_list_unknown", "models:\n  - id: a\n" + keyed + "    models: [a, b]\n", []string{"teams[0].models[1]: model \"b\" is not listed under models"}},
		{"key_models_unknown", "models:\n  - id: a\n" + keyed + "        models: [a, zz]\n", []string{"c.yaml:10: teams[0].keys[0].models[1]: key \"prod\": model \"zz\" is not listed under models"}},
		{"key_models_outside_team", "models:\n  - id: a\n  - id: b\n" + keyed + "        models: [b]\n    models: [a]\n",
			[]string{"c.yaml:11: teams[0].keys[0].models[0]: key \"prod\": model \"b\" is not in its team's models"}},
		{"key_models_outside_team_no_catalogue", keyed + "        models: [b]\n    models: [a]\n", []string{"teams[0].keys[0].models[0]: key \"prod\": model \"b\" is not in its team's models"}},
		{"key_models_bad_id", keyed + "        models: ['a b']\n", []string{"teams[0].keys[0].models[0]: key \"prod\": contains a space"}},
		{"key_models_duplicate", keyed + "        models: [a, a]\n", []string{"teams[0].keys[0].models[1]: key \"prod\": model \"a\" is listed twice"}},

		// teams and keys
		{"team_no_name", "upstream: {api_key: k}\nteams:\n  - keys: [{name: a, key: kkkkkkkk}]\n", []string{"c.yaml:3: teams[0].name: want 1-64 letters"}},
		{"team_name_slash", strings.Replace(keyed, "name: search", "name: a/b", 1), []string{"teams[0].name: want 1-64 letters", `"a/b"`}},
		{"team_dup", keyed + "  - name: search\n    keys: [{name: other, key: mg-other}]\n", []string{"c.yaml:8: teams[1].name: duplicate team name \"search\" (also teams[0])"}},
		{"team_without_keys", "upstream: {api_key: k}\nteams:\n  - name: empty\n", []string{"teams[0].keys: a team needs at least one key"}},
		{"key_dup_name", keyed + "      - name: prod\n        key: mg-other\n", []string{"c.yaml:8: teams[0].keys[1].name: duplicate key name \"prod\""}},
		{"key_dup_value_across_teams", keyed + "  - name: chat\n    keys: [{name: prod, key: mg-search-prod}]\n", []string{"teams[1].keys[0]: same key as teams[0].keys[0]"}},
		{"key_both", keyed + "        key_sha256: " + strings.Repeat("a", 64) + "\n", []string{"teams[0].keys[0]: set key or key_sha256, not both"}},
		{"key_neither", "upstream: {api_key: k}\nteams:\n  - name: t\n    keys:\n      - name: k\n", []string{"c.yaml:5: teams[0].keys[0].key: set key or key_sha256"}},
		{"key_sha_short", "upstream: {api_key: k}\nteams:\n  - name: t\n    keys:\n      - name: k\n        key_sha256: abc\n", []string{"c.yaml:6: teams[0].keys[0].key_sha256: want 64 hex digits (sha256 of the key), got 3 characters"}},
		{"key_sha_not_hex", "upstream: {api_key: k}\nteams:\n  - name: t\n    keys:\n      - name: k\n        key_sha256: " + strings.Repeat("g", 64) + "\n", []string{"got a non-hex character"}},
		{"key_with_space", strings.Replace(keyed, "mg-search-prod", "'mg search'", 1), []string{"teams[0].keys[0].key: contains a space"}},
		{"keys_mode_needs_platform_key", "teams:\n  - name: search\n    keys: [{name: a, key: mg-a}]\n", []string{"c.yaml:2: teams[0]: no platform key for this team"}},
		{"platform_key_control_char", "upstream:\n  api_key: \"sk-\\r\\nX-Evil: 1\"\n", []string{"upstream.api_key: contains a space, control"}},
		{"admin_equals_team_key", keyed + "admin_keys: [mg-search-prod]\n", []string{"admin_keys[0]: same key as teams[0].keys[0]: admin keys must differ"}},
		{"admin_dup", "admin_keys: [a-key, a-key]\n", []string{"admin_keys[1]: same key as admin_keys[0]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "c.yaml", envMap(testEnv))
			if err == nil {
				t.Fatalf("want an error containing %q, got none", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
			for _, secret := range []string{"hunter2", "mg-search-prod\n", "sk-platform-0123456789"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error echoes a secret: %q", err)
				}
			}
		})
	}
}

func TestKeyModelsNarrowTheTeam(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // the key's models after parsing
	}{
		{"subset_of_team", "models:\n  - id: a\n  - id: b\n" + keyed + "        models: [a]\n    models: [a, b]\n", []string{"a"}},
		{"team_allows_all", "models:\n  - id: a\n  - id: b\n" + keyed + "        models: [b]\n", []string{"b"}},
		{"no_catalogue_any_id", "limits: {unlisted_models: allow}\n" + keyed + "        models: [anything]\n", []string{"anything"}},
		{"unset_is_the_team_list", "models:\n  - id: a\n" + keyed + "    models: [a]\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, []byte(c.yaml), "c.yaml", nil)
			if got := cfg.Teams[0].Keys[0].Models; strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("key models = %q, want %q", got, c.want)
			}
		})
	}
}

func TestDuplicateKeyAcrossKeyAndHash(t *testing.T) {
	// The same key given once in clear and once hashed (upper-case hex) is still a duplicate.
	sum := sha256.Sum256([]byte("mg-search-prod"))
	src := keyed + "  - name: other\n    keys:\n      - name: hashed\n        key_sha256: " + strings.ToUpper(hex.EncodeToString(sum[:])) + "\n"
	_, err := Parse([]byte(src), "c.yaml", nil)
	if err == nil || !strings.Contains(err.Error(), "teams[1].keys[0]: same key as teams[0].keys[0]") {
		t.Fatalf("want a duplicate-key error, got %v", err)
	}
}

func TestPassthroughNeedsNoPlatformKey(t *testing.T) {
	cfg := mustParse(t, []byte("limits:\n  requests_per_minute: 10\n"), "c.yaml", nil)
	if cfg.KeysMode() || cfg.Upstream.APIKey != "" {
		t.Errorf("want passthrough without a platform key: %+v", cfg)
	}
}

func TestTeamUpstreamKeySatisfiesKeysMode(t *testing.T) {
	src := "models: [{id: m}]\nteams:\n  - name: search\n    upstream_api_key: sk-team\n    keys: [{name: a, key: mg-a}]\n"
	if _, err := Parse([]byte(src), "c.yaml", nil); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsListedInFileOrder(t *testing.T) {
	src := "listen: nope\nlimits:\n  requests_per_minute: -1\nratelimit:\n  on_store_error: x\n"
	_, err := Parse([]byte(src), "c.yaml", nil)
	if err == nil {
		t.Fatal("want errors")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"c.yaml:1: listen", "c.yaml:3: limits.requests_per_minute", "c.yaml:5: ratelimit.on_store_error"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestErrorListIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("limits:\n")
	for i := range 50 {
		b.WriteString("  bogus_" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ": 1\n")
	}
	_, err := Parse([]byte(b.String()), "c.yaml", nil)
	if err == nil {
		t.Fatal("want errors")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxReported+1 || !strings.Contains(lines[maxReported], "30 more problems") {
		t.Errorf("got %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestValidateInCode(t *testing.T) {
	cfg := Default()
	cfg.Upstream.GatewayURL = "not a url"
	cfg.Limits.TokensPerDay = -1
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "config: upstream.gateway_url:") || !strings.Contains(err.Error(), "limits.tokens_per_day") {
		t.Fatalf("Validate() = %v", err)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default() must validate: %v", err)
	}
}

// A config built in code without translate.max_n fans out to the default; a set one is kept.
func TestTranslateChoices(t *testing.T) {
	if got := (Translate{}).Choices(); got != DefaultMaxN {
		t.Errorf("unset: %d, want %d", got, DefaultMaxN)
	}
	if got := (Translate{MaxN: 3}).Choices(); got != 3 {
		t.Errorf("set: %d, want 3", got)
	}
}

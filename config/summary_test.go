package config

import (
	"strings"
	"testing"
)

func TestSummaryKeysMode(t *testing.T) {
	cfg := mustParse(t, []byte(fullYAML), "config.yaml", envMap(testEnv))
	s := cfg.Summary()
	summaryHas(t, s,
		"mode: keys (1 teams, 2 keys)",
		"listen: 0.0.0.0:9090",
		"gateway_url: https://gateway.example.com",
		"api_key: set (default platform key)",
		"retries: 0;",
		"gpt-4o-mini -> some-platform-model",
		"  plain\n",
		"team search (shadow):",
		"models: gpt-4o-mini",
		"team limits: 600 requests/min, 200000 tokens/min, 16 concurrent, 5000000 tokens/day (UTC)",
		"key search-prod (key): 60 requests/min, unlimited tokens/min",
		"unlimited tokens/day (UTC); models: gpt-4o-mini\n",
		"key search-hashed (key_sha256): unlimited\n",
		"admin keys: 1",
		"ratelimit store: redis://redis.internal:6379/1 (credentials hidden); on store error: deny",
	)
	for _, secret := range []string{"sk-platform-0123456789", "mg-search-prod-key", "mg-admin-key-xyz", "hunter2", "9f86d0"} {
		if strings.Contains(s, secret) {
			t.Errorf("summary reveals %q:\n%s", secret, s)
		}
	}
}

func TestSummaryPassthrough(t *testing.T) {
	cfg := Default()
	cfg.Limits.RequestsPerMinute = 30
	s := cfg.Summary()
	summaryHas(t, s,
		"mode: passthrough",
		"listen: 127.0.0.1:8080",
		"gateway_url: (unset",
		"api_key: not set",
		"limits per caller: 30 requests/min",
		"models: none configured",
		"ratelimit store: memory (daily usage kept in modelgate-data)",
		"admin keys: 0",
		"breaker: 5 failures within 1m0s open a model's or platform key's breaker for 30s, then one probe (doubling per failed probe up to 5m0s)",
	)
	off := 0
	cfg.Upstream.Breaker.Failures = &off
	summaryHas(t, cfg.Summary(), "breaker: off (failures: 0)")
}

// summaryCase is a config and what its summary must say and must not say.
type summaryCase struct {
	name, yaml string
	want       []string
	wantNot    []string
}

// summaryCases parses each case's config and checks its summary has every want and no wantNot.
func summaryCases(t *testing.T, tests []summaryCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, []byte(tt.yaml), "c.yaml", nil)
			s := cfg.Summary()
			summaryHas(t, s, tt.want...)
			for _, not := range tt.wantNot {
				if strings.Contains(s, not) {
					t.Errorf("summary has %q:\n%s", not, s)
				}
			}
		})
	}
}

// summaryHas fails t for each line part the summary s lacks.
func summaryHas(t *testing.T, s string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

func TestSummaryOnBudgetExceeded(t *testing.T) {
	summaryCases(t, []summaryCase{
		{"default_refuse", "listen: 127.0.0.1:1\n", []string{"on budget exceeded: refuse\n"}, []string{"clamp"}},
		{"top_level_clamp", "limits:\n  on_budget_exceeded: clamp\n", []string{"on budget exceeded: clamp (the output cap is lowered"}, nil},
		{"team_override", "models: [{id: m}]\nupstream: {api_key: sk-test-key-0123456789}\nteams:\n  - name: t\n    limits: {on_budget_exceeded: clamp, tokens_per_day: 5}\n    keys: [{name: k, key: mg-team-key-0123456789}]\n",
			[]string{"team limits: unlimited requests/min, unlimited tokens/min, unlimited concurrent, 5 tokens/day (UTC)\n  on budget exceeded: clamp\n", "on budget exceeded: refuse\n"}, nil},
		{"team_policy_alone_is_no_limit", "models: [{id: m}]\nupstream: {api_key: sk-test-key-0123456789}\nteams:\n  - name: t\n    limits: {on_budget_exceeded: refuse}\n    keys: [{name: k, key: mg-team-key-0123456789}]\n",
			[]string{"team limits: unlimited\n  on budget exceeded: refuse\n"}, nil},
	})
}

func TestClampsBudgets(t *testing.T) {
	tests := []struct {
		name      string
		top, team string
		want      bool
	}{
		{"default", "", "", false},
		{"top_clamp", BudgetClamp, "", true},
		{"team_clamp", "", BudgetClamp, true},
		{"team_refuses_over_top_clamp", BudgetClamp, BudgetRefuse, false},
		{"top_refuse", BudgetRefuse, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			cfg.Limits.OnBudgetExceeded = tt.top
			if got := cfg.ClampsBudgets(Limits{OnBudgetExceeded: tt.team}); got != tt.want {
				t.Errorf("ClampsBudgets = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSummaryNamesWeightedRoutes(t *testing.T) {
	y := "models:\n  - id: canary\n    routes:\n      - {upstream: model-a, weight: 9}\n      - {upstream: model-b, weight: 1}\n    sticky: user\n" +
		"  - id: ab\n    routes: [{upstream: x, weight: 1}, {upstream: y, weight: 2}]\n"
	cfg := mustParse(t, []byte(y), "c.yaml", envMap(testEnv))
	summaryHas(t, cfg.Summary(),
		"canary -> model-a 90% (weight 9), model-b 10% (weight 1); sticky per user",
		"ab -> x 33.33% (weight 1), y 66.67% (weight 2); a fresh draw per call",
	)
}

// TestRoutedModelRevalidates: a parsed config with routes passes Validate again (main
// validates after flag overrides), so the defaults must not give a routed model an upstream.
func TestRoutedModelRevalidates(t *testing.T) {
	cfg := mustParse(t, []byte("models:\n  - id: canary\n    routes: [{upstream: a, weight: 1}]\n"), "c.yaml", envMap(testEnv))
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a parsed config fails Validate: %v", err)
	}
	if cfg.Models[0].Upstream != "" {
		t.Fatalf("a routed model got upstream %q by default", cfg.Models[0].Upstream)
	}
}

// Each model's routing keys show under it; a model without them shows nothing more.
func TestSummaryFallbacks(t *testing.T) {
	yaml := "models:\n  - id: big\n    context_window: 128000\n    fallbacks: [small]\n    first_token_timeout: 20s\n    compact_instructions: Summarise.\n  - id: small\n"
	cfg := mustParse(t, []byte(yaml), "c.yaml", envMap(nil))
	s := cfg.Summary()
	summaryHas(t, s, "  big\n    fallbacks: small; context_window: 128000 tokens; first_token_timeout: 20s; compact_instructions: 10 bytes\n  small\n")
}

// The Responses WebSocket mode's three keys show on a line of their own; the connection cap
// is not a request limit, so the limits lines do not name it.
func TestSummaryWebSocket(t *testing.T) {
	summaryCases(t, []summaryCase{
		{"defaults", "listen: 127.0.0.1:1\n",
			[]string{"websocket (GET /v1/responses): at most 16 connections open per caller in this process, 4 lanes each; each closed after 1h0m0s; pinged every 30s\n"}, nil},
		{"set", "limits:\n  websocket_connections: 4\n  websocket_lanes: 2\nserver:\n  websocket_max_age: 10m\n  websocket_ping_interval: 15s\n",
			[]string{"websocket (GET /v1/responses): at most 4 connections open per caller in this process, 2 lanes each; each closed after 10m0s; pinged every 15s\n",
				"limits per caller: unlimited\n"}, []string{"websocket_connections", "websocket_lanes"}},
		{"keys_mode", "models: [{id: m}]\nupstream: {api_key: sk-test-key-0123456789}\nlimits: {websocket_connections: 2}\nteams:\n  - name: t\n    keys: [{name: k, key: mg-team-key-0123456789}]\n",
			[]string{"websocket (GET /v1/responses): at most 2 connections open per key in this process, 4 lanes each;"}, nil},
	})
}

// The summary names how modelgate speaks to the platform (upstream.http2) and what it trusts
// (upstream.tls.ca_file).
func TestSummaryUpstreamProtocol(t *testing.T) {
	ca, _ := writeCA(t, t.TempDir())
	summaryCases(t, []summaryCase{
		{"defaults", "listen: 127.0.0.1:1\n", []string{
			"  http2: auto (HTTP/2 when the platform's TLS offers it, else HTTP/1.1)\n",
			"  tls.ca_file: none (the system's roots)\n"}, nil},
		{"h2c", "upstream:\n  http2: h2c\n", []string{"  http2: h2c (cleartext HTTP/2 with prior knowledge)\n"}, nil},
		{"off", "upstream:\n  http2: off\n", []string{"  http2: off (HTTP/1.1 always)\n"}, nil},
		{"ca_file", "upstream:\n  tls:\n    ca_file: " + ca + "\n", []string{
			"  tls.ca_file: " + ca + " (trusted besides the system's roots)\n"}, nil},
	})
}

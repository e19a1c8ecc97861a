package config

import (
	"strings"
	"testing"
)

func TestSummaryKeysMode(t *testing.T) {
	cfg, err := Parse([]byte(fullYAML), "config.yaml", envMap(testEnv))
	if err != nil {
		t.Fatal(err)
	}
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
		"key search-hashed (key_sha256): unlimited",
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
	)
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

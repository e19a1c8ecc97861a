package config

import (
	"strings"
	"testing"
)

func TestAttributionConfig(t *testing.T) {
	cases := []struct {
		name, yaml string
		bad        string // a part of the error; "" = valid
	}{
		{"all set", "models: [{id: m}]\n" + keyed + "        tags: {feature: search}\n    end_user_limits: {requests_per_minute: 20, tokens_per_day: 200000, spend_per_day: 1.5}\nusage:\n  tag_keys: [feature, customer]\n", ""},
		{"bad tag key", keyed + "usage:\n  tag_keys: [\"a/b\"]\n", "usage.tag_keys: want 1-64"},
		{"tag key twice", keyed + "usage:\n  tag_keys: [a, a]\n", `usage.tag_keys: "a" is listed twice`},
		{"negative end-user rpm", keyed + "    end_user_limits: {requests_per_minute: -1}\n", "teams[0].end_user_limits.requests_per_minute"},
		{"negative end-user spend", keyed + "    end_user_limits: {spend_per_day: -1}\n", "teams[0].end_user_limits.spend_per_day"},
		{"long default tag value", keyed + "        tags: {feature: " + strings.Repeat("v", 513) + "}\n", "teams[0].keys[0].tags: tag \"feature\": the value is longer than 512"},
		{"long default tag key", keyed + "        tags: {" + strings.Repeat("k", 65) + ": v}\n", "want 1-64 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml), "c.yaml", envMap(testEnv))
			if tc.bad == "" {
				if err != nil {
					t.Fatal(err)
				}
				summaryHas(t, cfg.Summary(),
					"usage tag keys recorded: feature, customer",
					"end-user limits: 20 requests/min, unlimited tokens/min, unlimited concurrent, 200000 tokens/day (UTC), spend 1.5/day (UTC) per end user",
					`key prod (key): unlimited; tags: "feature"="search"`)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("Parse: %v, want an error naming %q", err, tc.bad)
			}
		})
	}
}

func TestSummaryNoTagKeys(t *testing.T) {
	cfg := mustParse(t, []byte("models: [{id: m}]\n"+keyed), "c.yaml", envMap(testEnv))
	summaryHas(t, cfg.Summary(), "usage tag keys recorded: none")
}

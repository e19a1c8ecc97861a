package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"modelgate/apitest"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	return apitest.TempFile(t, "config.yaml", []byte(text))
}

func TestCheckCommand(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		env      map[string]string
		wantCode int
		wantOut  *regexp.Regexp // stdout for success, stderr for failure
		// wantWarnings are the lines a successful check writes to stderr.
		wantWarnings []string
	}{
		{
			name:     "broken_yaml_names_the_line",
			yaml:     "listen: 127.0.0.1:8080\nupstream:\n  gateway_url: http://gw\n   base_url: [\n",
			wantCode: 1, wantOut: regexp.MustCompile(`config\.yaml:\d+`),
		},
		{
			name:     "unknown_key_names_line_and_key",
			yaml:     "listen: 127.0.0.1:8080\nupstreem:\n  gateway_url: http://gw\n",
			wantCode: 1, wantOut: regexp.MustCompile(`config\.yaml:2:.*upstreem`),
		},
		{
			name:     "unset_variable_is_named",
			yaml:     "upstream:\n  api_key: ${MODELGATE_TEST_SURELY_UNSET}\n",
			wantCode: 1, wantOut: regexp.MustCompile(`config\.yaml:2:.*MODELGATE_TEST_SURELY_UNSET`),
		},
		{
			name: "valid_config_summarised_without_secrets",
			yaml: "upstream:\n  gateway_url: http://gw\n  base_url: http://api\n  api_key: ${MG_TEST_PLATFORM}\nmodels: [{id: m}]\n" +
				"teams:\n  - name: search\n    limits: { requests_per_minute: 600 }\n    keys:\n      - name: search-prod\n        key: ${MG_TEST_KEY}\n",
			env:      map[string]string{"MG_TEST_PLATFORM": "sk-platform-secret", "MG_TEST_KEY": "mg-local-secret"},
			wantCode: 0, wantOut: regexp.MustCompile(`(?s)team search.*600 requests/min.*key search-prod`),
			wantWarnings: []string{"warning: teams[0].keys[0] (team search, key search-prod) is 15 characters long; use at least 32 random characters (e.g. openssl rand -hex 16)"},
		},
		{
			name: "weighted_routes_summarised",
			yaml: "upstream:\n  gateway_url: http://gw\n  base_url: http://api\n" +
				"models:\n  - id: canary\n    routes: [{upstream: model-a, weight: 9}, {upstream: model-b, weight: 1}]\n    sticky: conversation\n",
			wantCode: 0, wantOut: regexp.MustCompile(`canary -> model-a 90% \(weight 9\), model-b 10% \(weight 1\); sticky per conversation`),
		},
		{
			name:     "routes_with_upstream_refused",
			yaml:     "models:\n  - id: canary\n    upstream: model-a\n    routes: [{upstream: model-b, weight: 1}]\n",
			wantCode: 1, wantOut: regexp.MustCompile(`config\.yaml:4:.*models\[0\]\.routes: set upstream or routes, not both`),
		},
		{
			name: "weak_keys_warned_without_failing",
			yaml: "upstream:\n  gateway_url: http://gw\n  base_url: http://api\n  api_key: ${MG_TEST_PLATFORM}\nmodels: [{id: m}]\n" +
				"teams:\n  - name: search\n    keys:\n      - name: short\n        key: ${MG_TEST_KEY}\n" +
				"      - name: reused\n        key: ${MG_TEST_PLATFORM}\nadmin_keys: [${MG_TEST_ADMIN}]\n",
			env: map[string]string{"MG_TEST_PLATFORM": "sk-platform-secret-0123456789abcdef", "MG_TEST_KEY": "mg-local-secret",
				"MG_TEST_ADMIN": "0123456789abcdef0123456789abcdef"},
			wantCode: 0, wantOut: regexp.MustCompile(`(?s)team search`),
			wantWarnings: []string{
				"warning: teams[0].keys[0] (team search, key short) is 15 characters long; use at least 32 random characters (e.g. openssl rand -hex 16)",
				"warning: teams[0].keys[1] (team search, key reused) is the same secret as upstream.api_key: a local key must not be a platform key",
			},
		},
		{
			// Issue 40: unlisted models allowed where a spend budget cannot price them, and a
			// platform model two entries send to.
			name: "unpriced_names_warned",
			yaml: "upstream:\n  gateway_url: http://gw\n  base_url: http://api\n  api_key: ${MG_TEST_PLATFORM}\n" +
				"models:\n  - {id: expensive, upstream: vendor-x, price: {input: 10, output: 30}}\n  - {id: cheap, upstream: vendor-x}\n" +
				"limits: {unlisted_models: allow}\n" +
				"teams:\n  - name: search\n    models: [expensive]\n    limits: {spend_per_day: 5}\n    keys:\n      - name: prod\n        key: ${MG_TEST_KEY}\n",
			env:      map[string]string{"MG_TEST_PLATFORM": "sk-platform-secret-0123456789abcdef", "MG_TEST_KEY": "0123456789abcdef0123456789abcdef"},
			wantCode: 0, wantOut: regexp.MustCompile(`unlisted models: allowed`),
			wantWarnings: []string{
				"warning: models expensive, cheap all send calls to platform model vendor-x: a call naming vendor-x is taken as expensive (the first listed), with its allow-list, price, limits and calibration; give vendor-x an entry of its own to decide otherwise",
				"warning: limits.unlisted_models is allow and team search has a spend limit: a call naming a model no entry lists has no price, so it costs nothing against it",
			},
		},
		{
			name: "teams_without_models_refused",
			yaml: "upstream:\n  gateway_url: http://gw\n  base_url: http://api\n  api_key: sk-platform-secret-0123456789abcdef\n" +
				"teams:\n  - name: search\n    keys:\n      - name: prod\n        key: 0123456789abcdef0123456789abcdef\n",
			wantCode: 1, wantOut: regexp.MustCompile(`models: no models are listed.*limits\.unlisted_models: allow`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			path := writeFile(t, tt.yaml)
			var stdout, stderr bytes.Buffer
			code := run([]string{"check", "--config", path}, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			out := stdout.String()
			if code != 0 {
				out = stderr.String()
			}
			if !tt.wantOut.MatchString(out) {
				t.Errorf("output %q does not match %s", out, tt.wantOut)
			}
			if code == 0 {
				got := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				if len(tt.wantWarnings) == 0 && stderr.Len() == 0 {
					got = nil
				}
				if strings.Join(got, "\n") != strings.Join(tt.wantWarnings, "\n") {
					t.Errorf("warnings:\n%s\nwant:\n%s", stderr.String(), strings.Join(tt.wantWarnings, "\n"))
				}
			}
			for _, v := range tt.env {
				if strings.Contains(stdout.String()+stderr.String(), v) {
					t.Errorf("check printed a secret")
				}
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"version", []string{"--version"}, 0, "modelgate "},
		{"unknown_flag", []string{"--nope"}, 2, "unknown flag"},
		{"stray_argument", []string{"serve"}, 2, "unexpected argument"},
		{"bad_log_level", []string{"--log-level", "loud"}, 2, "--log-level"},
		{"bad_log_format", []string{"--log-format", "xml"}, 2, "--log-format"},
		{"bad_simulate_upstream", []string{"--simulate", "--simulate-upstream", "h3"}, 2, `--simulate-upstream "h3": want h1, h2 or h2c`},
		{"simulate_upstream_alone", []string{"--simulate-upstream", "h2"}, 2, "--simulate-upstream needs --simulate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (%s)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String()+stderr.String(), tt.wantOut) {
				t.Errorf("output %q lacks %q", stdout.String()+stderr.String(), tt.wantOut)
			}
		})
	}
}

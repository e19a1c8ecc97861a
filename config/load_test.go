package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
)

// mustParse is Parse for a config the test needs: an error fails the test.
func mustParse(t *testing.T, data []byte, source string, getenv func(string) (string, bool)) *Config {
	t.Helper()
	cfg, err := Parse(data, source, getenv)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func envMap(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

var testEnv = map[string]string{
	"PLATFORM_API_KEY": "sk-platform-0123456789",
	"SEARCH_APP_KEY":   "mg-search-prod-key",
	"ADMIN_KEY":        "mg-admin-key-xyz",
	"EMPTY":            "",
	"RPM":              "60",
	"TRICKY":           "a: b\n- c\n{d: e}",
}

const fullYAML = `listen: 0.0.0.0:9090
upstream:
  gateway_url: https://gateway.example.com
  base_url: https://platform.example.com/
  api_key: ${PLATFORM_API_KEY}
  dial_timeout: 2s
  max_retries: 0
models:
  - id: gpt-4o-mini
    upstream: some-platform-model
  - id: plain
ratelimit:
  store: redis://:hunter2@redis.internal:6379/1
  on_store_error: deny
limits:
  requests_per_minute: 5
teams:
  - name: search
    models: [gpt-4o-mini]
    mode: shadow
    limits:
      requests_per_minute: 600
      tokens_per_minute: 200000
      concurrent_requests: 16
      tokens_per_day: 5000000
    keys:
      - name: search-prod
        key: ${SEARCH_APP_KEY}
        limits: { requests_per_minute: ${RPM} }
        models: [gpt-4o-mini]
      - name: search-hashed
        key_sha256: 9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08
admin_keys: [${ADMIN_KEY}]
translate:
  reasoning_field: reasoning
  drop_extra_fields: true
`

func TestParseFull(t *testing.T) {
	cfg := mustParse(t, []byte(fullYAML), "config.yaml", envMap(testEnv))
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Listen, "0.0.0.0:9090"},
		{"api_key", cfg.Upstream.APIKey, "sk-platform-0123456789"},
		{"dial", cfg.Upstream.DialTimeout, 2 * time.Second},
		{"explicit_zero_retries", *cfg.Upstream.MaxRetries, 0},
		{"default_header_timeout", cfg.Upstream.ResponseHeaderTimeout, 60 * time.Second},
		{"alias_upstream", cfg.Models[0].Upstream, "some-platform-model"},
		{"upstream_defaults_to_id", cfg.Models[1].Upstream, "plain"},
		{"store", cfg.Ratelimit.Store, "redis://:hunter2@redis.internal:6379/1"},
		{"on_store_error", cfg.Ratelimit.OnStoreError, "deny"},
		{"passthrough_limits", cfg.Limits.RequestsPerMinute, int64(5)},
		{"team_mode", cfg.Teams[0].Mode, "shadow"},
		{"team_tpd", cfg.Teams[0].Limits.TokensPerDay, int64(5000000)},
		{"key_from_env", cfg.Teams[0].Keys[0].Key, "mg-search-prod-key"},
		{"int_from_env", cfg.Teams[0].Keys[0].Limits.RequestsPerMinute, int64(60)},
		{"sha_lowercased", cfg.Teams[0].Keys[1].KeySHA256, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		{"admin", cfg.AdminKeys[0], "mg-admin-key-xyz"},
		{"reasoning_field", cfg.Translate.ReasoningField, "reasoning"},
		{"drop_extra", cfg.Translate.DropExtraFields, true},
		{"max_body_default", cfg.Server.MaxBodyBytes, int64(32 << 20)},
		{"max_upload_default", cfg.Server.MaxUploadBytes, int64(100_000_000)},
		{"keys_mode", cfg.KeysMode(), true},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %v, want %v", c.got, c.want)
			}
		})
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("a parsed config must stay valid after defaults: %v", err)
	}
}

func TestDefault(t *testing.T) {
	cfg := Default()
	want := Config{
		Listen: "127.0.0.1:8080",
		Upstream: Upstream{
			DialTimeout: 5 * time.Second, ResponseHeaderTimeout: 60 * time.Second,
			StreamIdleTimeout: 5 * time.Minute, RequestTimeout: 10 * time.Minute,
			HealthInterval: 15 * time.Second, KeepAliveInterval: 15 * time.Second,
			Breaker: Breaker{Window: time.Minute, Cooldown: 30 * time.Second}, HTTP2: HTTP2Auto,
		},
		Ratelimit: Ratelimit{Store: "memory", OnStoreError: "allow", DataPath: "modelgate-data", DefaultMaxOutputTokens: 4096},
		Server: Server{
			MaxBodyBytes: 32 << 20, MaxUploadBytes: 100 * 1000 * 1000,
			DrainTimeout: 30 * time.Second, ReadHeaderTimeout: 10 * time.Second, UploadIdleTimeout: 2 * time.Minute,
			BodyReadTimeout: 30 * time.Second, MaxInflatingBytes: 64 << 20, MaxInflightBodyBytes: 256 << 20,
			WebSocketMaxAge: 60 * time.Minute, WebSocketPingInterval: 30 * time.Second,
		},
		Translate: Translate{ReasoningField: "reasoning_content", MaxN: 8, ServerTools: ServerToolsDrop},
		Sidecar:   SidecarConf{BalanceCacheTTL: 5 * time.Second},
	}
	if cfg.Upstream.MaxRetries == nil || *cfg.Upstream.MaxRetries != 2 {
		t.Fatalf("max_retries default: %v", cfg.Upstream.MaxRetries)
	}
	cfg.Upstream.MaxRetries = nil
	if f := cfg.Upstream.Breaker.Failures; f == nil || *f != 5 {
		t.Fatalf("breaker.failures default: %v", f)
	}
	cfg.Upstream.Breaker.Failures = nil
	if cfg.Listen != want.Listen || !reflect.DeepEqual(cfg.Upstream, want.Upstream) || !reflect.DeepEqual(cfg.Ratelimit, want.Ratelimit) ||
		!reflect.DeepEqual(cfg.Server, want.Server) || cfg.Translate != want.Translate || cfg.Sidecar != want.Sidecar ||
		cfg.Responses.Scope != "team" {
		t.Errorf("Default() = %+v\nwant %+v", *cfg, want)
	}
	if cfg.KeysMode() {
		t.Error("the default config must be passthrough")
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		cfg, err := Parse([]byte(src), "c.yaml", nil)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if cfg.Listen != "127.0.0.1:8080" || cfg.KeysMode() {
			t.Errorf("%q: want the default passthrough config, got %+v", src, cfg)
		}
	}
}

// TestEnvCannotChangeStructure: a variable's value is one scalar, whatever YAML it contains.
func TestEnvCannotChangeStructure(t *testing.T) {
	src := "ratelimit:\n  data_path: ${TRICKY}\nadmin_keys: [$${LITERAL}, \"x$y$$z\"]\n"
	cfg := mustParse(t, []byte(src), "c.yaml", envMap(testEnv))
	if cfg.Ratelimit.DataPath != testEnv["TRICKY"] {
		t.Errorf("data_path = %q", cfg.Ratelimit.DataPath)
	}
	if got := cfg.AdminKeys; len(got) != 2 || got[0] != "${LITERAL}" || got[1] != "x$y$$z" {
		t.Errorf("admin_keys = %q", got)
	}
}

func TestExpand(t *testing.T) {
	env := envMap(map[string]string{"A": "1", "B_2": "two", "E": "", "R": "${A}"})
	cases := []struct {
		name, in, want, problem string
	}{
		{"none", "plain", "plain", ""},
		{"one", "${A}", "1", ""},
		{"embedded", "x-${A}-${B_2}-y", "x-1-two-y", ""},
		{"empty_value", "<${E}>", "<>", ""},
		{"escape", "$${A}", "${A}", ""},
		{"escape_then_var", "$${A}${A}", "${A}1", ""},
		{"lone_dollar", "a$b$", "a$b$", ""},
		{"value_not_reexpanded", "${R}", "${A}", ""},
		{"unset", "${NOPE}", "", "unset NOPE"},
		{"unterminated", "${A", "", "unterminated ${"},
		{"bad_name", "${A-B}", "", "invalid environment variable reference ${A-B}"},
		{"empty_name", "${}", "", "invalid environment variable reference ${}"},
		{"digit_first", "${1A}", "", "invalid environment variable reference"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, unset, problems := expand(c.in, env)
			for _, name := range unset {
				problems = append(problems, "unset "+name)
			}
			if c.problem == "" {
				if len(problems) > 0 || got != c.want {
					t.Errorf("expand(%q) = %q, %v; want %q", c.in, got, problems, c.want)
				}
				return
			}
			if len(problems) == 0 || !strings.Contains(problems[0], c.problem) {
				t.Errorf("expand(%q) problems %v, want %q", c.in, problems, c.problem)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	path := apitest.TempFile(t, "config.yaml", []byte("listen: 127.0.0.1:0\nupstream:\n  api_key: ${MODELGATE_TEST_LOAD_KEY}\n"))
	t.Setenv("MODELGATE_TEST_LOAD_KEY", "sk-from-env")
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Upstream.APIKey != "sk-from-env" {
		t.Errorf("api_key = %q", cfg.Upstream.APIKey)
	}
	if _, err := Load(filepath.Join(filepath.Dir(path), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	_, err := Parse([]byte("listen: [1]\n"), "c.yaml", nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 1 || ce.Path != "listen" || ce.File != "c.yaml" {
		t.Fatalf("want *Error at c.yaml:1 listen, got %#v", err)
	}
}

func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Skip("no example config.yaml at the repository root")
	}
	env := map[string]string{
		"PLATFORM_API_KEY": "sk-platform", "SEARCH_PLATFORM_KEY": "sk-search-platform",
		"SEARCH_APP_KEY": "mg-search", "CHAT_APP_KEY": "mg-chat", "MODELGATE_ADMIN_KEY": "mg-admin",
	}
	cfg, err := Parse(data, "config.yaml", func(name string) (string, bool) {
		v, ok := env[name]
		if !ok {
			t.Errorf("example config uses %s; add it to this test and the example's comments", name)
		}
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.KeysMode() {
		t.Error("the example config should show keys mode")
	}
}

// TestRefsInFlowCollections: the documented `admin_keys: [${MODELGATE_ADMIN_KEY}]` form must
// parse although YAML ends plain scalars at braces inside [..] and {..}.
func TestRefsInFlowCollections(t *testing.T) {
	src := "admin_keys: [${ADMIN_KEY}, pre-${RPM}-post, $${KEEP}]\nlimits: {requests_per_minute: ${RPM}, tokens_per_day: ${RPM}}\n"
	cfg := mustParse(t, []byte(src), "c.yaml", envMap(testEnv))
	want := []string{"mg-admin-key-xyz", "pre-60-post", "${KEEP}"}
	if len(cfg.AdminKeys) != len(want) {
		t.Fatalf("admin_keys = %q", cfg.AdminKeys)
	}
	for i := range want {
		if cfg.AdminKeys[i] != want[i] {
			t.Errorf("admin_keys[%d] = %q, want %q", i, cfg.AdminKeys[i], want[i])
		}
	}
	if cfg.Limits.RequestsPerMinute != 60 || cfg.Limits.TokensPerDay != 60 {
		t.Errorf("limits = %+v", cfg.Limits)
	}
}

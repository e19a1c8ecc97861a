package config

import (
	"strings"
	"testing"
	"time"
)

func TestKeepAliveDefaultAndOff(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want time.Duration
	}{
		{"absent_is_15s", "listen: 127.0.0.1:1\n", 15 * time.Second},
		{"explicit_zero_is_off", "upstream:\n  keepalive_interval: 0s\n", 0},
		{"explicit_value", "upstream:\n  keepalive_interval: 5s\n", 5 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, []byte(c.yaml), "c.yaml", nil)
			if got := cfg.Upstream.KeepAliveInterval; got != c.want {
				t.Fatalf("keepalive_interval = %v, want %v", got, c.want)
			}
		})
	}
	if got := Default().Upstream.KeepAliveInterval; got != 15*time.Second {
		t.Fatalf("Default() keepalive_interval = %v, want 15s", got)
	}
}

func TestBrowserKeys(t *testing.T) {
	ok := []string{
		"server:\n  cors_origins: [\"*\"]\n",
		"server:\n  cors_origins: [http://127.0.0.1:5173, https://chat.example.com]\n",
		"translate:\n  max_n: 128\n",
	}
	for _, y := range ok {
		if _, err := Parse([]byte(y), "c.yaml", nil); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
	bad := []struct{ yaml, want string }{
		{"server:\n  cors_origins: [chat.example.com]\n", "c.yaml:2: server.cors_origins[0]: want an origin"},
		{"server:\n  cors_origins: [https://chat.example.com/]\n", "server.cors_origins[0]: an origin is scheme://host[:port] only"},
		{"server:\n  cors_origins: [https://Chat.example.com]\n", "lowercase"},
		{"server:\n  cors_origins: [\"*\", https://a.example]\n", `server.cors_origins[0]: "*" allows every origin: list it alone`},
		{"translate:\n  max_n: 129\n", "translate.max_n: want 1-128"},
		{"translate:\n  max_n: -1\n", "translate.max_n: want 1-128"},
	}
	for _, c := range bad {
		_, err := Parse([]byte(c.yaml), "c.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
	cfg := mustParse(t, nil, "c.yaml", nil)
	if cfg.Translate.MaxN != 8 || len(cfg.Server.CORSOrigins) != 0 {
		t.Fatalf("defaults: max_n %d, cors_origins %v", cfg.Translate.MaxN, cfg.Server.CORSOrigins)
	}
}

func TestSummaryNamesCORS(t *testing.T) {
	for y, want := range map[string]string{
		"listen: 127.0.0.1:1\n": "browsers: no CORS",
		"server:\n  cors_origins: [http://localhost:5173]\ntranslate:\n  max_n: 2\n": "browsers: CORS for http://localhost:5173; chat n at most 2",
	} {
		cfg := mustParse(t, []byte(y), "c.yaml", nil)
		if s := cfg.Summary(); !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

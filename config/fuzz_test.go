package config

import (
	"errors"
	"testing"
)

// FuzzParse: no input may panic the loader, and whatever it accepts must stay valid after
// defaults and be summarisable. The seed corpus in testdata/fuzz/FuzzParse also runs as a
// regression test on every `go test`.
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullYAML))
	f.Add([]byte(keyed))
	f.Add([]byte("models:\n  - id: canary\n    routes: [{upstream: a, weight: 9}, {upstream: b, weight: 1}]\n    sticky: user\n"))
	f.Add([]byte("admin_keys: [${ADMIN_KEY}, $${X}]\nlimits: {requests_per_minute: ${RPM}}\n"))
	f.Add([]byte("models:\n  - id: a\n    fallbacks: [b, a, c]\n    context_window: 8000\n    first_token_timeout: 20s\n  - id: b\n"))
	f.Add([]byte(keyed + "        tags: {feature: search, \"a b\": c}\n    end_user_limits: {requests_per_minute: 2, spend_per_day: 0.5}\nusage:\n  tag_keys: [feature]\n"))
	f.Add([]byte("alerts:\n  check_interval: 2s\n  webhooks:\n    - {url: 'https://h.example/x?t=1', secret: s, events: [key.issued, budget.threshold]}\n"))
	env := envMap(testEnv)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml", env)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *config.Error: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate after defaults: %v", err)
		}
		if cfg.Summary() == "" {
			t.Fatal("empty summary")
		}
	})
}

package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func hexDigest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

func TestKeyWarnings(t *testing.T) {
	const (
		strong  = "0123456789abcdef0123456789abcdef" // exactly MinLocalKeyLength
		strong2 = "fedcba9876543210fedcba9876543210"
	)
	sha := func(s string) string { return hexDigest(s) }
	team := func(name string, keys ...Key) Team { return Team{Name: name, Keys: keys} }
	tests := []struct {
		name string
		cfg  Config
		want []string // one substring per warning, in order
	}{
		{"strong_keys", Config{Teams: []Team{team("a", Key{Name: "k", Key: strong})}, AdminKeys: []string{strong2}}, nil},
		{"short_team_key", Config{Teams: []Team{team("a", Key{Name: "k", Key: strong[:31]})}},
			[]string{"teams[0].keys[0] (team a, key k) is 31 characters long; use at least 32"}},
		{"short_admin_key", Config{AdminKeys: []string{strong, "admin-pw"}}, []string{"admin_keys[1] is 8 characters long"}},
		{"hashed_key_has_no_length", Config{Teams: []Team{team("a", Key{Name: "k", KeySHA256: sha("short")})}}, nil},
		{"team_key_is_the_platform_key", Config{Upstream: Upstream{APIKey: strong}, Teams: []Team{team("a", Key{Name: "k", Key: strong})}},
			[]string{"teams[0].keys[0] (team a, key k) is the same secret as upstream.api_key"}},
		{"hashed_key_is_a_team_platform_key", Config{Teams: []Team{{Name: "a", UpstreamAPIKey: strong2, Keys: []Key{{Name: "k", KeySHA256: sha(strong2)}}}}},
			[]string{"is the same secret as teams[0].upstream_api_key"}},
		{"admin_key_is_the_platform_key", Config{Upstream: Upstream{APIKey: strong2}, AdminKeys: []string{strong2}},
			[]string{"admin_keys[0] is the same secret as upstream.api_key"}},
		{"short_and_reused", Config{Upstream: Upstream{APIKey: "pw"}, AdminKeys: []string{"pw"}},
			[]string{"admin_keys[0] is 2 characters long", "admin_keys[0] is the same secret as upstream.api_key"}},
		{"simulate_placeholders_exempt", Config{Upstream: Upstream{APIKey: SimulatePlaceholder("PLATFORM_API_KEY")},
			Teams:     []Team{team("a", Key{Name: "k", Key: SimulatePlaceholder("SEARCH_APP_KEY")})},
			AdminKeys: []string{SimulatePlaceholder("MODELGATE_ADMIN_KEY")}}, nil},
		{"not_a_placeholder", Config{AdminKeys: []string{"sim-not a name"}}, []string{"admin_keys[0] is 14 characters long"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.KeyWarnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q lacks %q", got[i], w)
				}
			}
			for _, w := range got {
				for _, secret := range []string{strong, strong2, "admin-pw", strong[:31]} {
					if strings.Contains(w, secret) {
						t.Errorf("warning shows a key: %q", w)
					}
				}
			}
		})
	}
}

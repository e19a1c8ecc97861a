package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"modelgate/config"
)

func issuedConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Upstream.APIKey = "sk-platform"
	cfg.Models = []config.Model{{ID: "m1"}}
	cfg.Teams = []config.Team{
		{Name: "alpha", Models: []string{"m1"}, Limits: config.Limits{TokensPerDay: 9}, Keys: []config.Key{{Name: "cfg", Key: "mg-config-key"}}},
		{Name: "beta", Keys: []config.Key{{Name: "cfg", Key: "mg-config-key-beta"}}},
	}
	cfg.AdminKeys = []string{"mg-admin"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func hexSum(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// issuedAuth is an Authenticator of issuedConfig that also knows the keys of the returned Issued,
// whose expiries are judged by now.
func issuedAuth(t *testing.T, now func() time.Time) (*Authenticator, *Issued) {
	t.Helper()
	a, err := New(issuedConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	is := NewIssued(now)
	a.UseIssued(is)
	return a, is
}

func TestIssuedKeys(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, is := issuedAuth(t, func() time.Time { return now })
	if _, err := a.Authenticate("Bearer mg-issued-1"); err != ErrUnknown {
		t.Fatalf("before issue: %v", err)
	}
	err := is.Replace([]IssuedKey{
		{ID: "k1", Team: "alpha", Name: "bot", SHA256: hexSum("mg-issued-1"), Limits: config.Limits{RequestsPerMinute: 5}},
		{ID: "k2", Team: "beta", Name: "temp", SHA256: hexSum("mg-issued-2"), ExpiresAt: now.Add(time.Minute)},
		{ID: "k3", Team: "gone", Name: "orphan", SHA256: hexSum("mg-issued-3")},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate("Bearer mg-issued-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Team != "alpha" || p.KeyName != "bot" || p.ScopeID != "key:alpha/bot" || p.TeamScopeID != "team:alpha" ||
		p.PlatformKey.Reveal() != "sk-platform" || p.KeyLimits.RequestsPerMinute != 5 || p.TeamLimits.TokensPerDay != 9 || !p.AllowsModel("m1") || p.AllowsModel("m2") {
		t.Fatalf("principal %+v", p)
	}
	if is.LastUsed("k1").IsZero() {
		t.Error("last use not noted")
	}
	if _, err := a.Authenticate("Bearer mg-issued-2"); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := a.Authenticate("Bearer mg-issued-2"); err != ErrUnknown {
		t.Fatalf("at expiry: %v", err)
	}
	if _, err := a.Authenticate("Bearer mg-issued-3"); err != ErrUnknown {
		t.Fatalf("key of a team not in the config: %v", err)
	}
	if !a.IsAdmin("Bearer mg-admin") || a.IsAdmin("Bearer mg-issued-1") {
		t.Fatal("an issued key is not an admin key")
	}
	if err := is.Replace(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate("Bearer mg-issued-1"); err != ErrUnknown {
		t.Fatalf("after revocation: %v", err)
	}
	if err := is.Replace([]IssuedKey{{ID: "bad", Team: "alpha", Name: "x", SHA256: "zz"}}); err == nil {
		t.Fatal("a bad digest was accepted")
	}
}

// BenchmarkAuthenticateIssued authenticates against 10,000 issued keys (and the 1,000 config
// keys of benchConfig): the lookup is one hash and one map probe, whatever the count.
func BenchmarkAuthenticateIssued(b *testing.B) {
	a, err := New(benchConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	is := NewIssued(nil)
	keys := make([]IssuedKey, 10_000)
	for i := range keys {
		keys[i] = IssuedKey{ID: fmt.Sprint("k", i), Team: fmt.Sprintf("team-%02d", i%50), Name: fmt.Sprint("issued-", i),
			SHA256: hexSum(fmt.Sprintf("mg-issued-%05d-0123456789abcdef0123456789", i)), ExpiresAt: time.Now().Add(time.Hour)}
	}
	if err := is.Replace(keys); err != nil {
		b.Fatal(err)
	}
	a.UseIssued(is)
	benchHeaders(b, a, []benchHeader{
		{"issued_key", "Bearer mg-issued-04242-0123456789abcdef0123456789", true},
		{"unknown", "Bearer mg-issued-99999-0123456789abcdef0123456789", false},
		{"config_key", "Bearer mg-bench-25-13-0123456789abcdef", true},
	})
}

// An expiry past 2262 (where UnixNano wraps to a past instant) is later than any request,
// not long gone.
func TestIssuedKeyExpiryPast2262(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, is := issuedAuth(t, func() time.Time { return now })
	far := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := is.Replace([]IssuedKey{{ID: "k1", Team: "alpha", Name: "bot", SHA256: hexSum("mg-issued-1"), ExpiresAt: far}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate("Bearer mg-issued-1"); err != nil {
		t.Fatalf("a key expiring in 2300: %v", err)
	}
}

// A config key named like a live issued key of the same team clashes; another team's key of
// that name, or an expired issued key, does not.
func TestIssuedClash(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	is := NewIssued(func() time.Time { return now })
	if err := is.Replace([]IssuedKey{
		{ID: "k1", Team: "alpha", Name: "bot", SHA256: hexSum("mg-issued-1")},
		{ID: "k2", Team: "alpha", Name: "old", SHA256: hexSum("mg-issued-2"), ExpiresAt: now.Add(-time.Minute)},
	}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		team, key string
		clash     bool
	}{
		{"same team and name", "alpha", "bot", true},
		{"other team", "beta", "bot", false},
		{"other name", "alpha", "bot2", false},
		{"expired issued key", "alpha", "old", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := issuedConfig(t)
			for i := range cfg.Teams {
				if cfg.Teams[i].Name == tc.team {
					cfg.Teams[i].Keys = append(cfg.Teams[i].Keys, config.Key{Name: tc.key, Key: "mg-config-key-new"})
				}
			}
			err := is.Clash(cfg)
			if (err != nil) != tc.clash {
				t.Fatalf("Clash = %v, want clash %v", err, tc.clash)
			}
			if err != nil && (!strings.Contains(err.Error(), `"`+tc.team+`"`) || !strings.Contains(err.Error(), `"`+tc.key+`"`)) {
				t.Fatalf("the error does not name the team and key: %v", err)
			}
		})
	}
}

// Keys lists the current set, expiry included, and follows Replace.
func TestIssuedKeysList(t *testing.T) {
	is := NewIssued(nil)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	keys := []IssuedKey{
		{ID: "key_1", Team: "alpha", Name: "a", SHA256: hexSum("one"), ExpiresAt: exp},
		{ID: "key_2", Team: "beta", Name: "b", SHA256: hexSum("two")},
	}
	if err := is.Replace(keys); err != nil {
		t.Fatal(err)
	}
	got := map[string]IssuedKey{}
	for _, k := range is.Keys() {
		got[k.ID] = k
	}
	if len(got) != 2 || !got["key_1"].ExpiresAt.Equal(exp) || got["key_2"].Team != "beta" {
		t.Fatalf("listed %+v", got)
	}
	if err := is.Replace(keys[1:]); err != nil {
		t.Fatal(err)
	}
	if l := is.Keys(); len(l) != 1 || l[0].ID != "key_2" {
		t.Fatalf("after Replace: %+v", l)
	}
}

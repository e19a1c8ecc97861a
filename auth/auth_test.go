package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"modelgate/config"
)

const (
	keySearch   = "mg-search-prod-0123"
	keyHashed   = "mg-chat-hashed-4567"
	keyAdmin    = "mg-admin-89ab"
	platformKey = "sk-platform-CANARY"
	teamPlatKey = "sk-chat-platform-CANARY"
)

func sha256hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

func keysConfig(t testing.TB) *config.Config {
	t.Helper()
	src := `upstream:
  api_key: ` + platformKey + `
models: [{id: m1}, {id: m2}]
teams:
  - name: search
    models: [m1]
    limits: {requests_per_minute: 600}
    keys:
      - name: prod
        key: ` + keySearch + `
        limits: {requests_per_minute: 60}
  - name: chat
    mode: shadow
    upstream_api_key: ` + teamPlatKey + `
    keys:
      - name: hashed
        key_sha256: ` + strings.ToUpper(sha256hex(keyHashed)) + `
admin_keys: [` + keyAdmin + `]
`
	cfg, err := config.Parse([]byte(src), "test.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newAuth(t testing.TB, cfg *config.Config) *Authenticator {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthenticateKeysMode(t *testing.T) {
	a := newAuth(t, keysConfig(t))
	if a.Mode() != ModeKeys || a.Mode().String() != "keys" {
		t.Fatalf("mode = %v", a.Mode())
	}
	p, err := a.Authenticate("Bearer " + keySearch)
	if err != nil {
		t.Fatal(err)
	}
	want := Principal{
		Team: "search", KeyName: "prod", ScopeID: "key:search/prod", TeamScopeID: "team:search",
		PlatformKey: platformKey,
		KeyLimits:   config.Limits{RequestsPerMinute: 60}, TeamLimits: config.Limits{RequestsPerMinute: 600},
	}
	if p.Team != want.Team || p.KeyName != want.KeyName || p.ScopeID != want.ScopeID || p.TeamScopeID != want.TeamScopeID ||
		p.PlatformKey.Reveal() != platformKey || p.KeyLimits != want.KeyLimits || p.TeamLimits != want.TeamLimits || p.Shadow {
		t.Errorf("principal = %#v", *p)
	}
	if !p.AllowsModel("m1") || p.AllowsModel("m2") || p.AllowsModel("") {
		t.Errorf("allow-list [m1] misapplied: %v", p.Models)
	}

	p, err = a.Authenticate("bEaReR " + keyHashed)
	if err != nil {
		t.Fatalf("key_sha256 (upper-case hex) with a mixed-case scheme: %v", err)
	}
	if p.Team != "chat" || p.KeyName != "hashed" || p.PlatformKey.Reveal() != teamPlatKey || !p.Shadow || p.Models != nil || !p.AllowsModel("anything") {
		t.Errorf("principal = %#v", *p)
	}
}

func TestPrincipalIsACopy(t *testing.T) {
	a := newAuth(t, keysConfig(t))
	p1, _ := a.Authenticate("Bearer " + keySearch)
	p1.Team = "mutated"
	p1.KeyLimits.RequestsPerMinute = 1
	p2, _ := a.Authenticate("Bearer " + keySearch)
	if p2.Team != "search" || p2.KeyLimits.RequestsPerMinute != 60 {
		t.Errorf("a caller's change leaked into the next principal: %#v", *p2)
	}
}

// headerCase is an Authorization header Authenticate must refuse, and the error it must give.
type headerCase struct {
	name, header string
	want         error
}

func TestAuthenticateEdgeCases(t *testing.T) {
	a := newAuth(t, keysConfig(t))
	cases := []headerCase{
		{"missing", "", ErrMissing},
		{"scheme_only", "Bearer", ErrMissing},
		{"scheme_and_space", "Bearer ", ErrMalformed},
		{"wrong_scheme", "Basic " + keySearch, ErrMissing},
		{"token_without_scheme", keySearch, ErrMissing},
		{"scheme_glued", "Bearer" + keySearch, ErrMissing},
		{"header_16kb", "Bearer " + strings.Repeat("a", 16<<10), ErrMalformed},
		{"header_16kb_wrong_scheme", strings.Repeat("a", 16<<10), ErrMissing},
		{"token_4097", "Bearer " + strings.Repeat("a", 4097), ErrMalformed},
		{"token_4096_unknown", "Bearer " + strings.Repeat("a", 4096), ErrUnknown},
		{"sql_injection", "Bearer ' OR '1'='1", ErrMalformed},
		{"sql_injection_no_spaces", "Bearer '||'1'='1", ErrUnknown},
		{"format_verbs", "Bearer %s%n", ErrUnknown},
		{"format_verbs_spaced", "Bearer %s %n %x", ErrMalformed},
		{"trailing_space", "Bearer " + keySearch + " ", ErrMalformed},
		{"trailing_tab", "Bearer " + keySearch + "\t", ErrMalformed},
		{"trailing_nul", "Bearer " + keySearch + "\x00", ErrMalformed},
		{"embedded_nul", "Bearer mg-search\x00-prod-0123", ErrMalformed},
		{"crlf_injection", "Bearer " + keySearch + "\r\nX-Admin: 1", ErrMalformed},
		{"double_space", "Bearer  " + keySearch, ErrMalformed},
		{"leading_space", " Bearer " + keySearch, ErrMissing},
		{"non_ascii", "Bearer mg-search-prod-012\u00e9", ErrMalformed},
		{"prefix_of_key", "Bearer " + keySearch[:len(keySearch)-1], ErrUnknown},
		{"key_plus_char", "Bearer " + keySearch + "x", ErrUnknown},
		{"upper_cased_key", "Bearer " + strings.ToUpper(keySearch), ErrUnknown},
		{"hash_instead_of_key", "Bearer " + sha256hex(keyHashed), ErrUnknown},
		{"platform_key", "Bearer " + platformKey, ErrUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := a.Authenticate(c.header)
			if !errors.Is(err, c.want) || p != nil {
				t.Fatalf("Authenticate = %v, %v; want %v", p, err, c.want)
			}
			if strings.Contains(err.Error(), keySearch) || (len(c.header) > 7 && strings.Contains(err.Error(), c.header[7:])) {
				t.Errorf("error echoes the token: %q", err)
			}
			if a.IsAdmin(c.header) {
				t.Errorf("IsAdmin(%q) = true", c.header)
			}
		})
	}
}

func TestAdminSeparation(t *testing.T) {
	a := newAuth(t, keysConfig(t))
	cases := []struct {
		name      string
		header    string
		admin     bool
		dataPlane bool
	}{
		{"admin_key", "Bearer " + keyAdmin, true, false},
		{"admin_key_lowercase_scheme", "bearer " + keyAdmin, true, false},
		{"team_key", "Bearer " + keySearch, false, true},
		{"hashed_team_key", "Bearer " + keyHashed, false, true},
		{"admin_key_trailing_space", "Bearer " + keyAdmin + " ", false, false},
		{"admin_key_no_scheme", keyAdmin, false, false},
		{"unknown", "Bearer mg-nobody", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := a.IsAdmin(c.header); got != c.admin {
				t.Errorf("IsAdmin = %v, want %v", got, c.admin)
			}
			// The fingerprint names admin keys only: sha256 of the key, 8 hex digits.
			wantFP := ""
			if c.admin {
				sum := sha256.Sum256([]byte(keyAdmin))
				wantFP = hex.EncodeToString(sum[:4])
			}
			if got := a.AdminFingerprint(c.header); got != wantFP {
				t.Errorf("AdminFingerprint = %q, want %q", got, wantFP)
			}
			_, err := a.Authenticate(c.header)
			if (err == nil) != c.dataPlane {
				t.Errorf("Authenticate err = %v, want data-plane access %v", err, c.dataPlane)
			}
		})
	}
}

func TestPassthrough(t *testing.T) {
	cfg := config.Default()
	cfg.Limits = config.Limits{RequestsPerMinute: 7, TokensPerDay: 1000}
	cfg.AdminKeys = []string{keyAdmin}
	a := newAuth(t, cfg)
	if a.Mode() != ModePassthrough || a.Mode().String() != "passthrough" {
		t.Fatalf("mode = %v", a.Mode())
	}
	callerKey := "sk-caller-own-platform-key"
	p, err := a.Authenticate("Bearer " + callerKey)
	if err != nil {
		t.Fatal(err)
	}
	if p.Team != "" || p.KeyName != "passthrough" || p.TeamScopeID != "" || p.Models != nil || p.Shadow {
		t.Errorf("principal = %#v", *p)
	}
	if p.ScopeID != "caller:"+sha256hex(callerKey) {
		t.Errorf("ScopeID = %q", p.ScopeID)
	}
	if p.PlatformKey.Reveal() != callerKey {
		t.Error("passthrough must forward the caller's own token")
	}
	if p.KeyLimits != cfg.Limits || p.TeamLimits != (config.Limits{}) {
		t.Errorf("limits = %+v / %+v", p.KeyLimits, p.TeamLimits)
	}
	if !p.AllowsModel("any-model") {
		t.Error("passthrough has no allow-list")
	}
	other, _ := a.Authenticate("Bearer sk-another-caller")
	if other.ScopeID == p.ScopeID {
		t.Error("distinct callers must get distinct scopes")
	}
	failures := []headerCase{
		{"missing", "", ErrMissing},
		{"empty_token", "Bearer ", ErrMalformed},
		{"nul", "Bearer sk-x\x00", ErrMalformed},
		{"admin_key_not_forwarded", "Bearer " + keyAdmin, ErrUnknown},
	}
	for _, c := range failures {
		t.Run(c.name, func(t *testing.T) {
			if _, err := a.Authenticate(c.header); !errors.Is(err, c.want) {
				t.Errorf("err = %v, want %v", err, c.want)
			}
		})
	}
	if !a.IsAdmin("Bearer " + keyAdmin) {
		t.Error("admin keys work in passthrough mode too")
	}
}

func TestNewRefusesUnsafeConfigs(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"nil_config", nil, "nil config"},
		{"no_platform_key", func(c *config.Config) { c.Upstream.APIKey = "" }, "teams[0] (search): platform key is empty"},
		{"both_forms", func(c *config.Config) { c.Teams[0].Keys[0].KeySHA256 = sha256hex("x") }, "not both"},
		{"neither_form", func(c *config.Config) { c.Teams[0].Keys[0].Key = "" }, "key_sha256 must be 64 hex digits"},
		{"bad_hex", func(c *config.Config) { c.Teams[1].Keys[0].KeySHA256 = strings.Repeat("z", 64) }, "teams[1].keys[0] (chat/hashed): key_sha256 must be 64 hex digits"},
		{"duplicate_across_forms", func(c *config.Config) { c.Teams[1].Keys[0].KeySHA256 = sha256hex(keySearch) }, "configured twice"},
		{"admin_is_team_key", func(c *config.Config) { c.AdminKeys = append(c.AdminKeys, keySearch) }, "admin_keys[1] is also a team key"},
		{"empty_admin_key", func(c *config.Config) { c.AdminKeys = []string{""} }, "admin_keys[0]: is empty"},
		{"key_with_space", func(c *config.Config) { c.Teams[0].Keys[0].Key = "a b" }, "contains a space"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg *config.Config
			if c.mutate != nil {
				cfg = keysConfig(t)
				c.mutate(cfg)
			}
			a, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, %v; want error containing %q", a, err, c.want)
			}
			for _, secret := range []string{platformKey, teamPlatKey, keySearch, keyAdmin} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error reveals a key: %q", err)
				}
			}
		})
	}
}

func TestPassthroughNeedsNoPlatformKey(t *testing.T) {
	if _, err := New(config.Default()); err != nil {
		t.Fatal(err)
	}
}

// FuzzAuthenticate: hostile header bytes never panic, never authenticate as anyone but the
// key they carry, and only ever yield the three documented errors.
func FuzzAuthenticate(f *testing.F) {
	for _, seed := range []string{"", "Bearer", "Bearer ", "Bearer " + keySearch, "bearer " + keyAdmin,
		"Bearer ' OR '1'='1", "Bearer %s%n", "Bearer " + keySearch + "\x00", "Basic dXNlcjpwdw=="} {
		f.Add(seed)
	}
	a := newAuth(f, keysConfig(f))
	f.Fuzz(func(t *testing.T, header string) {
		p, err := a.Authenticate(header)
		switch {
		case err == nil:
			if header[len("Bearer "):] != keySearch && header[len("Bearer "):] != keyHashed {
				t.Fatalf("authenticated %q", header)
			}
		case p != nil:
			t.Fatal("principal returned with an error")
		case !errors.Is(err, ErrMissing) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknown):
			t.Fatalf("undocumented error %v", err)
		}
		if a.IsAdmin(header) && header[len("Bearer "):] != keyAdmin {
			t.Fatalf("admin for %q", header)
		}
	})
}

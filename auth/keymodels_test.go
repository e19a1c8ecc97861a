package auth

import (
	"testing"
	"time"

	"modelgate/config"
)

// TestKeyModelsNarrowTheTeam: a key's own model list narrows its team's allow-list, for
// config keys and issued keys alike, and never widens it (an issued key whose team lost a
// model since it was issued keeps only what both lists hold).
func TestKeyModelsNarrowTheTeam(t *testing.T) {
	cfg := config.Default()
	cfg.Upstream.APIKey = "sk-platform"
	cfg.Models = []config.Model{{ID: "m1"}, {ID: "m2"}, {ID: "m3"}}
	cfg.Teams = []config.Team{
		{Name: "alpha", Models: []string{"m1", "m2"}, Keys: []config.Key{
			{Name: "wide", Key: "mg-alpha-wide"},
			{Name: "narrow", Key: "mg-alpha-narrow", Models: []string{"m2"}},
		}},
		{Name: "beta", Keys: []config.Key{{Name: "narrow", Key: "mg-beta-narrow", Models: []string{"m3"}}}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	is := NewIssued(func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) })
	a.UseIssued(is)
	if err := is.Replace([]IssuedKey{
		{ID: "k1", Team: "alpha", Name: "bot", SHA256: hexSum("mg-issued-alpha"), Models: []string{"m1"}},
		{ID: "k2", Team: "beta", Name: "bot", SHA256: hexSum("mg-issued-beta"), Models: []string{"x"}},
		{ID: "k3", Team: "alpha", Name: "stale", SHA256: hexSum("mg-issued-stale"), Models: []string{"m1", "m9"}},
		{ID: "k4", Team: "alpha", Name: "gone", SHA256: hexSum("mg-issued-gone"), Models: []string{"m9"}},
		{ID: "k5", Team: "alpha", Name: "plain", SHA256: hexSum("mg-issued-plain")},
	}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key            string
		allowed, other []string
	}{
		{"mg-alpha-wide", []string{"m1", "m2"}, []string{"m3", ""}},
		{"mg-alpha-narrow", []string{"m2"}, []string{"m1", "m3"}},
		{"mg-beta-narrow", []string{"m3"}, []string{"m1", "anything"}},
		{"mg-issued-alpha", []string{"m1"}, []string{"m2"}},
		{"mg-issued-beta", []string{"x"}, []string{"m1", "y"}},
		{"mg-issued-stale", []string{"m1"}, []string{"m2", "m9"}},
		{"mg-issued-gone", nil, []string{"m1", "m2", "m9"}},
		{"mg-issued-plain", []string{"m1", "m2"}, []string{"m3"}},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			p, err := a.Authenticate("Bearer " + c.key)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range c.allowed {
				if !p.AllowsModel(m) {
					t.Errorf("AllowsModel(%q) = false, want true", m)
				}
			}
			for _, m := range c.other {
				if p.AllowsModel(m) {
					t.Errorf("AllowsModel(%q) = true, want false", m)
				}
			}
		})
	}
}

// BenchmarkAllowsModel is the model check of a narrowed key: the team's list and the key's.
func BenchmarkAllowsModel(b *testing.B) {
	p := &Principal{Models: []string{"m1", "m2", "m3", "m4"}, KeyModels: []string{"m2", "m4"}}
	for b.Loop() {
		if !p.AllowsModel("m4") {
			b.Fatal("refused")
		}
	}
}

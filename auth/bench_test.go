package auth

import (
	"fmt"
	"testing"

	"modelgate/config"
)

// benchConfig has 1,000 keys over 50 teams, half given in clear and half as key_sha256.
func benchConfig(b *testing.B) *config.Config {
	b.Helper()
	cfg := config.Default()
	cfg.Upstream.APIKey = "sk-platform"
	for t := range 50 {
		team := config.Team{Name: fmt.Sprintf("team-%02d", t), Models: []string{"m1", "m2"}}
		for k := range 20 {
			key := config.Key{Name: fmt.Sprintf("key-%02d", k)}
			secret := fmt.Sprintf("mg-bench-%02d-%02d-0123456789abcdef", t, k)
			if k%2 == 0 {
				key.Key = secret
			} else {
				key.KeySHA256 = sha256hex(secret)
			}
			team.Keys = append(team.Keys, key)
		}
		cfg.Teams = append(cfg.Teams, team)
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

func BenchmarkAuthenticate(b *testing.B) {
	a, err := New(benchConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	benchHeaders(b, a, []benchHeader{
		{"known_key", "Bearer mg-bench-25-13-0123456789abcdef", true},
		// Same length and all but the last byte equal: should cost the same as any miss.
		{"unknown_near_miss", "Bearer mg-bench-25-13-0123456789abcdeX", false},
		{"unknown_unrelated", "Bearer zz-nothing-alike-at-all-000000000", false},
		{"malformed", "Bearer mg-bench-25-13 0123456789abcdef", false},
	})
}

// benchHeader is an Authorization header a benchmark authenticates, and whether it passes.
type benchHeader struct {
	name, header string
	ok           bool
}

// benchHeaders runs a sub-benchmark per header, each authenticating it with a.
func benchHeaders(b *testing.B, a *Authenticator, headers []benchHeader) {
	for _, c := range headers {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Authenticate(c.header); (err == nil) != c.ok {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAuthenticatePassthrough(b *testing.B) {
	a, err := New(config.Default())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate("Bearer sk-caller-0123456789abcdef"); err != nil {
			b.Fatal(err)
		}
	}
}

package audit

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"modelgate/config"
)

func baseConfig() *config.Config {
	return &config.Config{
		Listen:    "127.0.0.1:8080",
		AdminKeys: []string{"admin-secret-one"},
		Models:    []config.Model{{ID: "big", Upstream: "model-a"}, {ID: "small"}},
		Teams: []config.Team{
			{Name: "search", UpstreamAPIKey: "platform-secret", Limits: config.Limits{SpendPerDay: 25},
				Keys: []config.Key{{Name: "prod", Key: "team-secret-prod"}}},
			{Name: "chat"},
		},
	}
}

func TestConfigChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *config.Config)
		want   []string
	}{
		{"nothing", func(c *config.Config) {}, nil},
		{"a team's limit", func(c *config.Config) { c.Teams[0].Limits.SpendPerDay = 30 }, []string{"teams[search].limits.spend_per_day"}},
		{"a secret", func(c *config.Config) { c.Teams[0].Keys[0].Key = "team-secret-rotated" }, []string{"teams[search].keys[prod].key"}},
		{"the admin keys", func(c *config.Config) { c.AdminKeys = append(c.AdminKeys, "admin-secret-two") }, []string{"admin_keys"}},
		{"a team added before the others", func(c *config.Config) {
			c.Teams = append([]config.Team{{Name: "ops"}}, c.Teams...)
		}, []string{"teams[ops]"}},
		{"a team removed", func(c *config.Config) { c.Teams = c.Teams[:1] }, []string{"teams[chat]"}},
		{"teams reordered", func(c *config.Config) { c.Teams[0], c.Teams[1] = c.Teams[1], c.Teams[0] }, nil},
		{"a pointer set", func(c *config.Config) { n := 3; c.Upstream.MaxRetries = &n }, []string{"upstream.max_retries"}},
		{"a duration and a model", func(c *config.Config) {
			c.Server.DrainTimeout = time.Minute
			c.Models[1].Fallbacks = []string{"big"}
		}, []string{"models[small].fallbacks", "server.drain_timeout"}},
		{"an empty list is no list", func(c *config.Config) { c.Teams[1].Models = []string{} }, nil},
		{"a name that is not plain is compared as the whole list", func(c *config.Config) {
			c.Teams[1].Name = "chat]\nforged"
		}, []string{"teams"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := baseConfig()
			tc.change(cur)
			got := ConfigChanges(baseConfig(), cur)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, p := range got {
				for _, secret := range []string{"secret", "\n"} {
					if strings.Contains(p, secret) {
						t.Fatalf("path %q shows %q", p, secret)
					}
				}
			}
		})
	}
}

func TestConfigChangesFromNothing(t *testing.T) {
	got := ConfigChanges(nil, baseConfig())
	for _, want := range []string{"listen", "teams[search]", "admin_keys", "models[big]"} {
		if !strings.Contains(strings.Join(got, ","), want) {
			t.Errorf("%q missing from %q", want, got)
		}
	}
}

// TestOpaqueValuesCompareWhole: a struct with no field a config sets (time.Time) is one
// setting, not a struct of nothing.
func TestOpaqueValuesCompareWhole(t *testing.T) {
	type section struct {
		Since time.Time         `yaml:"since"`
		Tags  map[string]string `yaml:"tags"`
	}
	type conf struct {
		S section `yaml:"s"`
	}
	at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		b    conf
		want string
	}{
		{"same", conf{section{Since: at}}, ""},
		{"a later time", conf{section{Since: at.Add(time.Second)}}, "s.since"},
		{"an empty map is no map", conf{section{Since: at, Tags: map[string]string{}}}, ""},
		{"a map entry", conf{section{Since: at, Tags: map[string]string{"k": "secret-value"}}}, "s.tags"},
	} {
		var got []string
		diffValue(reflect.ValueOf(conf{section{Since: at}}), reflect.ValueOf(tc.b), "", &got)
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

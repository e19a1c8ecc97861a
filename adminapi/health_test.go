package adminapi

import (
	"fmt"
	"testing"

	"modelgate/breaker"
	"modelgate/config"
)

// Breakers are named by the model ids that send to their upstream: its upstream (the id
// itself when none is set) or one of its routes.
func TestHealthBreakerNames(t *testing.T) {
	cfg := &config.Config{Models: []config.Model{
		{ID: "big", Upstream: "sim-503"},
		{ID: "also-big", Upstream: "sim-503"},
		{ID: "assistant", Routes: []config.Route{{Upstream: "v1"}, {Upstream: "sim-503"}}},
		{ID: "plain"},
	}}
	got := healthBreakers(cfg, []breaker.Status{{Name: "key:ab12cd34"}, {Name: "model:plain"}, {Name: "model:sim-503"}, {Name: "model:gone"}})
	want := []string{"[]", "[plain]", "[big also-big assistant]", "[]"}
	for i, b := range got {
		if s := fmt.Sprint(b.Models); s != want[i] {
			t.Errorf("%s named %s, want %s", b.Name, s, want[i])
		}
	}
}

package upstream

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/platform"
)

// TestRuntimeTeamsUseTheDefaultPool: a team created through the admin API calls with the
// config's default platform keys as a pool (a refused key is retried on the next), while a
// principal of a team the config does not name and that is no runtime team keeps its own key.
func TestRuntimeTeamsUseTheDefaultPool(t *testing.T) {
	fake := &fakePlatform{status: map[string][]int{"sk-d1": {http.StatusUnauthorized}}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client, err := platform.New(srv.URL, srv.URL, srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Upstream: config.Upstream{RequestTimeout: 5 * time.Second, UpstreamAPIKeys: []string{"sk-d1", "sk-d2"}},
		Teams: []config.Team{{Name: "alpha", UpstreamAPIKey: "sk-alpha", Keys: []config.Key{{Name: "alpha-1"}}}}}
	gw := New(Deps{Platform: client, Log: slog.New(slog.DiscardHandler)}, cfg, true)
	gw.runtime.BreakTiesWith(func(int) int { return 0 })
	open := func(p *auth.Principal) {
		t.Helper()
		resp, cancel, f := gw.Open(t.Context(), &Call{Principal: p, Body: []byte(`{}`), Trail: Trail{RequestID: "req-1"}})
		if f != nil {
			t.Fatalf("call failed: %+v", f)
		}
		resp.Body.Close()
		cancel()
	}
	open(&auth.Principal{Team: "growth", KeyName: "bot", PlatformKey: "sk-d1", Runtime: true})
	open(&auth.Principal{Team: "gone", KeyName: "k", PlatformKey: "sk-own"})
	if got, want := fake.keys(), []string{"sk-d1", "sk-d2", "sk-own"}; !slices.Equal(got, want) {
		t.Fatalf("keys sent %v, want %v", got, want)
	}
}

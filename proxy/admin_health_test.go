package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/breaker"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/reqlog"
	"modelgate/testclock"
	"modelgate/upstream"
)

// GET /admin/health after calls that fall back and calls of weighted routes: the fallback
// by reason, the routes' split, each model's figures and the recent requests, newest first,
// team-scoped on request; bad parameters get a 4xx in the OpenAI shape.
func TestAdminHealth(t *testing.T) {
	var mu sync.Mutex
	var hooked []string // what the Fallback hook (the metrics) heard
	hooks := reqlog.Hooks{Fallback: func(model, served, reason string) {
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, model+">"+served+":"+reason)
	}}
	// Today's figures start again at midnight: the clock leaves the test ten minutes of the day.
	offset := testclock.SameDay(testclock.Origin(), 10*time.Minute).Sub(time.Now())
	clock := func() time.Time { return time.Now().Add(offset) }
	env := fallbackEnv(t, envOptions{hooks: hooks, now: clock, mutate: func(c *config.Config) {
		c.Models = append(c.Models, config.Model{ID: "assistant", Routes: []config.Route{{Upstream: "sim-v1", Weight: 1}, {Upstream: "sim-v2", Weight: 1}}})
	}})
	env.sim.SetModelScript("sim-big", platformsim.Reply{Status: 503, Body: errorJSON("server_error", "server_is_overloaded", "busy")})
	if status, h, b := env.do(t, "POST", "/v1/chat/completions", keyBeta, []byte(`{"model":"big","messages":[{"role":"user","content":"hi"}]}`)); status != 200 || h.Get(servedModelHeader) != "wide" {
		t.Fatalf("big: %d served by %q: %s", status, h.Get(servedModelHeader), b)
	}
	const calls = 6
	for range calls {
		if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"assistant","input":"hi"}`)); status != 200 {
			t.Fatalf("assistant: %d %s", status, b)
		}
	}
	var body []byte
	ok := waitFor(5*time.Second, func() bool { // the last request is reported after its answer
		var status int
		status, _, body = env.do(t, "GET", "/admin/health", "mg-admin-key", nil)
		return status == 200 && gjson.GetBytes(body, "recent.#").Int() == calls+1
	})
	if !ok {
		t.Fatalf("health: %s", body)
	}
	j := gjson.ParseBytes(body)
	if got := j.Get("fallbacks").Raw; got != `[{"model":"big","served_model":"wide","reason":"status_5xx","count":1}]` {
		t.Errorf("fallbacks %s", got)
	}
	mu.Lock()
	if fmt.Sprint(hooked) != "[big>wide:status_5xx]" {
		t.Errorf("the Fallback hook heard %v", hooked)
	}
	mu.Unlock()
	var routed int64
	for _, r := range j.Get("routes").Array() {
		if r.Get("model").Str != "assistant" {
			t.Errorf("route of %s", r.Raw)
		}
		routed += r.Get("calls").Int()
	}
	if routed != calls {
		t.Errorf("route calls %d, want %d: %s", routed, calls, j.Get("routes").Raw)
	}
	if got := j.Get(`models.#(model=="assistant").last_hour.requests`).Int(); got != calls {
		t.Errorf("assistant's requests in the hour: %d", got)
	}
	if got := j.Get(`models.#(model=="big").today`); got.Get("requests").Int() != 1 || got.Get("errors").Int() != 0 || got.Get("p95_ms").Float() <= 0 {
		t.Errorf("big today: %s", got.Raw)
	}
	if r := j.Get("recent.0"); r.Get("model").Str != "assistant" || r.Get("team").Str != "alpha" || r.Get("key").Str != "alpha-1" {
		t.Errorf("newest recent request %s", r.Raw)
	}
	if r := j.Get("recent.6"); r.Get("model").Str != "big" || r.Get("served_model").Str != "wide" || r.Get("status").Int() != 200 {
		t.Errorf("oldest recent request %s", r.Raw)
	}
	if got := j.Get("per_replica").Raw; got != `["models","routes","fallbacks","recent"]` {
		t.Errorf("per_replica %s", got)
	}
	if bytesContain(body, keyAlpha1) || bytesContain(body, keyBeta) {
		t.Error("a key's secret in the health answer")
	}

	_, _, b := env.do(t, "GET", "/admin/health?team=beta&limit=5", "mg-admin-key", nil)
	if got := gjson.GetBytes(b, "recent.#.team").Raw; got != `["beta"]` {
		t.Errorf("beta's recent requests: %s", got)
	}
	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"?team=nobody", 404, "unknown_team"},
		{"?limit=abc", 400, "invalid_value"},
		{"?limit=201", 400, "invalid_value"},
		{"?limit=-1", 400, "invalid_value"},
	} {
		status, _, b := env.do(t, "GET", "/admin/health"+tc.query, "mg-admin-key", nil)
		if status != tc.status || gjson.GetBytes(b, "error.code").Str != tc.code {
			t.Errorf("%s: %d %s", tc.query, status, b)
		}
	}
	if status, _, _ := env.do(t, "GET", "/admin/health", keyAlpha1, nil); status != http.StatusForbidden {
		t.Errorf("a team key read the health view: %d", status)
	}
}

func bytesContain(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestFallbackReason(t *testing.T) {
	for _, tc := range []struct {
		f    upstream.Failure
		want string
	}{
		{upstream.Failure{Status: 503, Kind: upstream.KindBreakerOpen}, reqlog.FallbackBreakerOpen},
		{upstream.Failure{Status: 504, Kind: "first_token_timeout"}, reqlog.FallbackFirstTokenTimeout},
		{upstream.Failure{Status: 400, Kind: "status_4xx", Body: []byte(`{"error":{"code":"context_length_exceeded"}}`)}, reqlog.FallbackContextLength},
		{upstream.Failure{Status: 400, Kind: "status_4xx", Body: []byte(`{"error":{"code":"invalid_value"}}`)}, reqlog.FallbackOther},
		{upstream.Failure{Status: 429, Kind: "status_4xx"}, reqlog.FallbackStatus429},
		{upstream.Failure{Status: 504, Kind: "timeout"}, reqlog.FallbackTimeout},
		{upstream.Failure{Status: 500, Kind: "status_5xx"}, reqlog.FallbackStatus5xx},
		{upstream.Failure{Status: 502, Kind: "dial"}, reqlog.FallbackUnreachable},
		{upstream.Failure{Status: 502, Kind: "reset"}, reqlog.FallbackUnreachable},
	} {
		if got := fallbackReason(&tc.f); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

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

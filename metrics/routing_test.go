package metrics

import (
	"fmt"
	"testing"

	"modelgate/config"
	"modelgate/reqlog"
)

func routingConfig() *config.Config {
	canary := config.Model{ID: "assistant", Routes: []config.Route{{Upstream: "assistant-v1", Weight: 9}, {Upstream: "assistant-v2", Weight: 1}}}
	return &config.Config{
		Models: []config.Model{configModel("big"), configModel("medium"), canary},
		Teams:  []config.Team{configTeam("search", "search-cfg")},
	}
}

func TestFallbacksTotal(t *testing.T) {
	m := New(routingConfig())
	h := m.Hooks()
	for _, tc := range []struct{ model, served, reason, wantModel, wantServed, wantReason string }{
		{"big", "medium", reqlog.FallbackStatus5xx, "big", "medium", "status_5xx"},
		{"big", "medium", reqlog.FallbackStatus5xx, "big", "medium", "status_5xx"},
		{"big", "medium", reqlog.FallbackFirstTokenTimeout, "big", "medium", "first_token_timeout"},
		{"big", "not-configured", reqlog.FallbackContextLength, "big", "other", "context_length"},
		{"big", "medium", "Made Up", "big", "medium", "other"},
	} {
		h.Fallback(tc.model, tc.served, tc.reason)
	}
	for labels, want := range map[[3]string]float64{
		{"big", "medium", "status_5xx"}: 2, {"big", "medium", "first_token_timeout"}: 1,
		{"big", "other", "context_length"}: 1, {"big", "medium", "other"}: 1,
	} {
		got := counterValue(t, m, "modelgate_fallbacks_total", map[string]string{"model": labels[0], "served_model": labels[1], "reason": labels[2]})
		if got != want {
			t.Errorf("fallbacks%v = %v, want %v", labels, got, want)
		}
	}
	// A reload that drops the fallback drops its series.
	cfg := routingConfig()
	cfg.Models = cfg.Models[:1]
	m.Reload(cfg)
	if n := seriesCount(t, m, "modelgate_fallbacks_total"); n != 1 {
		t.Errorf("%d fallback series after medium was removed, want big's one to other", n)
	}
}

func TestRouteCallsTotal(t *testing.T) {
	m := New(routingConfig())
	h := m.Hooks()
	for _, s := range []reqlog.RequestSummary{
		{Route: "/v1/responses", Model: "assistant", UpstreamModel: "assistant-v1", Status: 200},
		{Route: "/v1/responses", Model: "assistant", UpstreamModel: "assistant-v1", Status: 200},
		{Route: "/v1/responses", Model: "assistant", UpstreamModel: "assistant-v2", Status: 500},
		{Route: "/v1/responses", Model: "big", ServedModel: "assistant", UpstreamModel: "assistant-v2", Status: 200},
		{Route: "/v1/responses", Model: "assistant", UpstreamModel: "not-a-route", Status: 200},
		{Route: "/v1/responses", Model: "big", Status: 200}, // no routes: not counted
	} {
		serve(h, s)
	}
	for up, want := range map[string]float64{"assistant-v1": 2, "assistant-v2": 2, "other": 1} {
		if got := counterValue(t, m, "modelgate_route_calls_total", map[string]string{"model": "assistant", "upstream_model": up}); got != want {
			t.Errorf("route %s: %v calls, want %v", up, got, want)
		}
	}
	if n := seriesCount(t, m, "modelgate_route_calls_total"); n != 3 {
		t.Errorf("%d route series, want 3", n)
	}
}

// A call with an issued key is labelled by the key's name; past the cap of names, by
// "(issued)"; a caller without an accepted key keeps "".
func TestIssuedKeyLabel(t *testing.T) {
	m := New(routingConfig())
	h := m.Hooks()
	key := func(team, k string) string {
		serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: team, Key: k, Model: "big", Status: 200})
		for _, want := range []string{k, issuedOverflow, ""} {
			if counterValue(t, m, "modelgate_requests_total", map[string]string{"route": "/v1/chat/completions", "team": team, "key": want, "model": "big", "status": "200"}) > 0 {
				return want
			}
		}
		return "?"
	}
	if got := key("search", "search-cfg"); got != "search-cfg" {
		t.Errorf("config key labelled %q", got)
	}
	if got := key("search", "nightly-batch"); got != "nightly-batch" {
		t.Errorf("issued key labelled %q", got)
	}
	if got := key("search", "bad name!"); got != "" {
		t.Errorf("an invalid name labelled %q", got)
	}
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "gone-team", Key: "some-key", Model: "big", Status: 200})
	if counterValue(t, m, "modelgate_requests_total", map[string]string{"route": "/v1/chat/completions", "team": "", "key": "", "model": "big", "status": "200"}) != 1 {
		t.Error("a key of a team no longer configured is not labelled \"\"")
	}
	for i := range maxIssuedKeyLabels {
		serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "search", Key: fmt.Sprintf("k%d", i), Model: "big", Status: 200})
	}
	if got := key("search", "one-too-many"); got != issuedOverflow {
		t.Errorf("a key past the cap labelled %q", got)
	}
	if got := key("search", "nightly-batch"); got != "nightly-batch" {
		t.Errorf("a key labelled before the cap lost its name: %q", got)
	}
	if n := seriesCount(t, m, "modelgate_requests_total"); n != maxIssuedKeyLabels+4 {
		t.Errorf("%d request series: want the config key, %d issued names, (issued) and two empty ones (the issued key label is not bounded)", n, maxIssuedKeyLabels)
	}
}

// TestRuntimeTeamLabel: a team created through the admin API labels its calls by its name
// and its issued keys by theirs, as a config team's; at most maxRuntimeTeamLabels names,
// then runtimeOverflow with no key label; a team a reload removed stays "".
func TestRuntimeTeamLabel(t *testing.T) {
	m := New(routingConfig())
	h := m.Hooks()
	calls := func(team, key string) float64 {
		return counterValue(t, m, "modelgate_requests_total", map[string]string{"route": "/v1/chat/completions", "team": team, "key": key, "model": "big", "status": "200"})
	}
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "gamma", RuntimeTeam: true, Key: "gamma-ci", Model: "big", Status: 200})
	if calls("gamma", "gamma-ci") != 1 {
		t.Error("a runtime team's call is not labelled team=gamma key=gamma-ci")
	}
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "removed", Key: "k", Model: "big", Status: 200})
	if calls("", "") != 1 {
		t.Error("a call of a config team a reload removed is not labelled \"\"")
	}
	for i := range maxRuntimeTeamLabels - 1 { // gamma holds one name already
		serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: fmt.Sprintf("t%d", i), RuntimeTeam: true, Key: "k", Model: "big", Status: 200})
	}
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "late", RuntimeTeam: true, Key: "late-1", Model: "big", Status: 200})
	if calls(runtimeOverflow, "") != 1 {
		t.Errorf("a runtime team past the cap is not labelled %s with no key", runtimeOverflow)
	}
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "gamma", RuntimeTeam: true, Key: "gamma-ci", Model: "big", Status: 200})
	if calls("gamma", "gamma-ci") != 2 {
		t.Error("a runtime team labelled before the cap lost its name")
	}
}

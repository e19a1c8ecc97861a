package metrics

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/breaker"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/reqlog"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func TestEstimatesExported(t *testing.T) {
	m := New(&config.Config{Models: []config.Model{configModel("gpt-4o-mini"), configModel("claude-x")}})
	tb := calibration.New(nil, nil, nil)
	for range 8 {
		tb.Observe("alpha", "gpt-4o-mini", 100, 150)
		tb.Observe("alpha", "gpt-4o-mini", 100, 250)
		tb.Observe("alpha", "caller-named-model", 100, 300)
	}
	m.WatchEstimates(tb)
	body := scrape(t, m)
	for _, want := range []string{
		`modelgate_estimate_ratio{model="gpt-4o-mini"} 1.8`,
		`modelgate_estimate_spread{model="gpt-4o-mini"} 0.25`,
		`modelgate_estimate_samples{model="gpt-4o-mini"} 16`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, grepLines(body, "modelgate_estimate"))
		}
	}
	for _, unwanted := range []string{"caller-named-model", `model="claude-x"`, `model="other"`} {
		if strings.Contains(body, unwanted) {
			t.Errorf("%s exported:\n%s", unwanted, grepLines(body, "modelgate_estimate"))
		}
	}

	// A reload that adds the model exports it at the next scrape; the table is read then.
	m.Reload(&config.Config{Models: []config.Model{configModel("gpt-4o-mini"), configModel("caller-named-model")}})
	tb.Observe("alpha", "gpt-4o-mini", 100, 200)
	body = scrape(t, m)
	for _, want := range []string{`modelgate_estimate_samples{model="caller-named-model"} 8`, `modelgate_estimate_samples{model="gpt-4o-mini"} 17`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("after the reload, missing %s in:\n%s", want, grepLines(body, "modelgate_estimate"))
		}
	}
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestWatchInflightBodies(t *testing.T) {
	m := New(&config.Config{})
	var used atomic.Int64
	m.WatchInflightBodies(used.Load)
	for _, want := range []int64{0, 16384, 0} {
		used.Store(want)
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		line := "modelgate_inflight_body_bytes " + map[int64]string{0: "0", 16384: "16384"}[want] + "\n"
		if !strings.Contains(rec.Body.String(), line) {
			t.Fatalf("no %q in the scrape", line)
		}
	}
}

func TestBreakerStateExported(t *testing.T) {
	m := New(&config.Config{})
	set := breaker.New(breaker.Options{Settings: breaker.Settings{Failures: 2, Window: time.Minute, Cooldown: time.Minute}})
	set.Report("model:gpt-4o", true)
	set.Report("model:gpt-4o", true) // opens
	set.Report("key:0a1b2c3d", true) // counted, still closed
	m.WatchBreakers(set)
	body := scrape(t, m)
	for _, want := range []string{`modelgate_breaker_state{breaker="model:gpt-4o"} 2`, `modelgate_breaker_state{breaker="key:0a1b2c3d"} 0`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, grepLines(body, "modelgate_breaker"))
		}
	}
}

func TestSpendTotal(t *testing.T) {
	m := New(labelConfig())
	h := m.Hooks()
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini", Status: 200, CostMicros: 1_500_000})
	serve(h, reqlog.RequestSummary{Route: "/v1/responses", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini", Status: 200, CostMicros: 250})
	serve(h, reqlog.RequestSummary{Route: "/v1/responses", Team: "beta", Key: "beta-1", Model: "gpt-4o-mini", Status: 429})
	if got := counterValue(t, m, "modelgate_spend_total", map[string]string{"team": "alpha", "model": "gpt-4o-mini"}); got != 1.50025 {
		t.Errorf("alpha spend %v, want 1.50025", got)
	}
	if n := seriesCount(t, m, "modelgate_spend_total"); n != 1 {
		t.Errorf("%d spend series; a call that cost nothing adds none", n)
	}
}

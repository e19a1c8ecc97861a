package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"modelgate/config"
	"modelgate/reqlog"
)

// series finds one series of a metric family by its exact label set; nil when absent.
func series(t *testing.T, m *Metrics, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, s := range f.GetMetric() {
			if len(s.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range s.GetLabel() {
				if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
					continue next
				}
			}
			return s
		}
	}
	return nil
}

func counterValue(t *testing.T, m *Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	s := series(t, m, name, labels)
	if s == nil {
		return 0
	}
	return s.GetCounter().GetValue()
}

func seriesCount(t *testing.T, m *Metrics, name string) int {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

func gaugeValue(t *testing.T, m *Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	s := series(t, m, name, labels)
	if s == nil {
		t.Fatalf("no series %s%v", name, labels)
	}
	return s.GetGauge().GetValue()
}

// serve runs one request through the hooks the way the proxy does.
func serve(h reqlog.Hooks, s reqlog.RequestSummary) {
	h.RequestStarted()
	if s.Stream {
		h.StreamOpened(s.Route)
		h.StreamClosed(s.Route)
	}
	h.RequestDone(s)
}

// servedAll is metrics for cfg that have counted each of summaries as a served request, and
// their hooks, for more.
func servedAll(cfg *config.Config, summaries []reqlog.RequestSummary) (*Metrics, reqlog.Hooks) {
	m := New(cfg)
	h := m.Hooks()
	for _, s := range summaries {
		serve(h, s)
	}
	return m, h
}

func TestRequestsAndTokens(t *testing.T) {
	m := New(labelConfig())
	h := m.Hooks()
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini",
		Status: 200, Duration: 300 * time.Millisecond, InputTokens: 12, OutputTokens: 30, Attempts: 1})
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini",
		Status: 200, Stream: true, Duration: 2 * time.Second, TTFB: 40 * time.Millisecond, InputTokens: 8, OutputTokens: 5, Attempts: 3})
	serve(h, reqlog.RequestSummary{Route: "/v1/responses", Team: "beta", Key: "beta-1", Model: "made-up-model-123", Status: 404})

	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"alpha_ok", "modelgate_requests_total", map[string]string{"route": "/v1/chat/completions", "team": "alpha", "key": "alpha-1", "model": "gpt-4o-mini", "status": "200"}, 2},
		{"unknown_model_is_other", "modelgate_requests_total", map[string]string{"route": "/v1/responses", "team": "beta", "key": "beta-1", "model": "other", "status": "404"}, 1},
		{"input_tokens", "modelgate_tokens_total", map[string]string{"team": "alpha", "model": "gpt-4o-mini", "direction": "input"}, 20},
		{"output_tokens", "modelgate_tokens_total", map[string]string{"team": "alpha", "model": "gpt-4o-mini", "direction": "output"}, 35},
		{"retries", "modelgate_upstream_retries_total", map[string]string{"route": "/v1/chat/completions"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := counterValue(t, m, tc.metric, tc.labels); got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		})
	}
	if n := seriesCount(t, m, "modelgate_tokens_total"); n != 2 {
		t.Errorf("a request with no tokens added token series: %d series, want 2", n)
	}

	hist := series(t, m, "modelgate_request_duration_seconds", map[string]string{"route": "/v1/chat/completions"}).GetHistogram()
	if hist.GetSampleCount() != 2 || hist.GetSampleSum() < 2.29 || hist.GetSampleSum() > 2.31 {
		t.Errorf("duration histogram count=%d sum=%v, want 2 and 2.3", hist.GetSampleCount(), hist.GetSampleSum())
	}
	ttfb := series(t, m, "modelgate_stream_time_to_first_byte_seconds", map[string]string{"route": "/v1/chat/completions"})
	if ttfb == nil || ttfb.GetHistogram().GetSampleCount() != 1 {
		t.Error("want one time-to-first-byte sample: only the stream has one")
	}
	if got := gaugeValue(t, m, "modelgate_in_flight_requests", nil); got != 0 {
		t.Errorf("in flight = %v after every request finished", got)
	}
	if got := gaugeValue(t, m, "modelgate_open_streams", map[string]string{"route": "/v1/chat/completions"}); got != 0 {
		t.Errorf("open streams = %v after the stream closed", got)
	}
}

func TestGaugesWhileOpen(t *testing.T) {
	m := New(labelConfig())
	h := m.Hooks()
	h.RequestStarted()
	h.RequestStarted()
	h.StreamOpened("/v1/responses")
	if got := gaugeValue(t, m, "modelgate_in_flight_requests", nil); got != 2 {
		t.Errorf("in flight = %v, want 2", got)
	}
	if got := gaugeValue(t, m, "modelgate_open_streams", map[string]string{"route": "/v1/responses"}); got != 1 {
		t.Errorf("open streams = %v, want 1", got)
	}
	h.StreamClosed("/v1/responses")
	h.RequestDone(reqlog.RequestSummary{Route: "/v1/responses", Status: 200})
	if got := gaugeValue(t, m, "modelgate_in_flight_requests", nil); got != 1 {
		t.Errorf("in flight = %v, want 1", got)
	}
}

func TestRefusalsAndUpstreamErrors(t *testing.T) {
	m, _ := servedAll(labelConfig(), []reqlog.RequestSummary{
		{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Status: 429, Refusal: "requests_per_minute"},
		{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Status: 429, Refusal: "requests_per_minute"},
		{Route: "/v1/chat/completions", Team: "beta", Key: "beta-1", Status: 200, Refusal: "shadow_tokens_per_minute"},
		{Route: "/v1/chat/completions", Team: "beta", Key: "beta-1", Status: 200, Refusal: "store_unavailable_allowed"},
		{Route: "/v1/responses", Team: "alpha", Key: "alpha-1", Status: 502, UpstreamErr: "dial", Attempts: 3},
		{Route: "/v1/responses", Team: "alpha", Key: "alpha-1", Status: 502, UpstreamErr: "Weird Kind: with spaces"},
	})
	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"enforced", "modelgate_limit_refusals_total", map[string]string{"team": "alpha", "reason": "requests_per_minute"}, 2},
		{"shadow_is_not_a_refusal", "modelgate_limit_refusals_total", map[string]string{"team": "beta", "reason": "shadow_tokens_per_minute"}, 0},
		{"shadow", "modelgate_limit_shadow_refusals_total", map[string]string{"team": "beta", "reason": "tokens_per_minute"}, 1},
		{"fail_open", "modelgate_limit_store_fail_open_total", nil, 1},
		{"dial", "modelgate_upstream_errors_total", map[string]string{"route": "/v1/responses", "kind": "dial"}, 1},
		{"unbounded_kind_folded", "modelgate_upstream_errors_total", map[string]string{"route": "/v1/responses", "kind": "other"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := counterValue(t, m, tc.metric, tc.labels); got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		})
	}
	if n := seriesCount(t, m, "modelgate_limit_refusals_total"); n != 1 {
		t.Errorf("refusal series = %d, want 1 (shadow and fail-open are counted elsewhere)", n)
	}
}

// Clients choose models, paths and keys; none of that may mint series.
func TestCardinalityBounded(t *testing.T) {
	m := New(labelConfig())
	h := m.Hooks()
	for i := range 500 {
		serve(h, reqlog.RequestSummary{
			Route: "unknown", Team: "", Key: fmt.Sprintf("caller-%d", i),
			Model: fmt.Sprintf("model-%d", i), Status: 401 + i%2, UpstreamErr: fmt.Sprintf("kind %d", i),
		})
	}
	if n := seriesCount(t, m, "modelgate_requests_total"); n != 2 {
		t.Errorf("requests_total has %d series after 500 distinct client-chosen names, want 2 (one per status)", n)
	}
	if n := seriesCount(t, m, "modelgate_upstream_errors_total"); n != 1 {
		t.Errorf("upstream_errors_total has %d series, want 1", n)
	}
}

func TestReloadChangesKnownNames(t *testing.T) {
	m := New(labelConfig())
	h := m.Hooks()
	done := reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "gamma", Key: "gamma-1", Model: "new-model", Status: 200}
	serve(h, done)

	cfg := labelConfig()
	cfg.Models = append(cfg.Models, configModel("new-model"))
	cfg.Teams = append(cfg.Teams, configTeam("gamma", "gamma-1"))
	m.Reload(cfg)
	m.ReloadRejected()
	serve(h, done)

	before := map[string]string{"route": "/v1/chat/completions", "team": "", "key": "", "model": "other", "status": "200"}
	after := map[string]string{"route": "/v1/chat/completions", "team": "gamma", "key": "gamma-1", "model": "new-model", "status": "200"}
	if counterValue(t, m, "modelgate_requests_total", before) != 1 || counterValue(t, m, "modelgate_requests_total", after) != 1 {
		t.Error("names added by a reload should become labels from the reload on, and not before")
	}
	for result, want := range map[string]float64{"applied": 1, "rejected": 1} {
		if got := counterValue(t, m, "modelgate_config_reloads_total", map[string]string{"result": result}); got != want {
			t.Errorf("reloads{result=%s} = %v, want %v", result, got, want)
		}
	}
}

func TestHandlerServesPrivateRegistry(t *testing.T) {
	a, b := New(labelConfig()), New(labelConfig()) // a shared registry would panic here
	serve(a.Hooks(), reqlog.RequestSummary{Route: "/healthz", Status: 200})
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	text := string(body)
	for _, want := range []string{
		`modelgate_requests_total{key="",model="",route="/healthz",status="200",team=""} 1`,
		"# TYPE modelgate_request_duration_seconds histogram",
		"go_goroutines ",
		"modelgate_config_reloads_total{result=\"rejected\"} 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "process_") != processMetricsSupported() {
		t.Errorf("process collector presence does not match this platform")
	}
	if seriesCount(t, b, "modelgate_requests_total") != 0 {
		t.Error("two Metrics share series")
	}
}

// A reload deletes the series of the teams, keys and models it removed, and only those; a
// request counted with the old names after the reload cannot bring them back.
func TestReloadDropsRemovedNames(t *testing.T) {
	cfg := labelConfig()
	cfg.Models = append(cfg.Models, configModel("m-kept"), configModel("m-gone"))
	cfg.Teams = append(cfg.Teams, configTeam("kept", "k-kept", "k-gone"), configTeam("gone", "g-1"))
	const chat = "/v1/chat/completions"
	m, h := servedAll(cfg, []reqlog.RequestSummary{
		{Route: chat, Team: "kept", Key: "k-kept", Model: "m-kept", Status: 200, InputTokens: 3, OutputTokens: 2},
		{Route: chat, Team: "kept", Key: "k-gone", Model: "m-kept", Status: 200, InputTokens: 3},
		{Route: chat, Team: "kept", Key: "k-kept", Model: "m-gone", Status: 200, InputTokens: 3},
		{Route: chat, Team: "gone", Key: "g-1", Model: "m-kept", Status: 200, InputTokens: 3},
		{Route: chat, Team: "gone", Key: "g-1", Model: "m-kept", Status: 429, Refusal: "requests_per_minute"},
		{Route: chat, Team: "gone", Key: "g-1", Model: "m-kept", Status: 200, Refusal: "shadow_tokens_per_minute"},
	})

	next := labelConfig()
	next.Models = append(next.Models, configModel("m-kept"))
	next.Teams = append(next.Teams, configTeam("kept", "k-kept"))
	m.Reload(next)
	// In flight across the reload: its names are gone, so it is counted without them.
	serve(h, reqlog.RequestSummary{Route: chat, Team: "gone", Key: "g-1", Model: "m-gone", Status: 200, InputTokens: 1})

	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				switch v := lp.GetValue(); {
				case lp.GetName() == "team" && v == "gone",
					lp.GetName() == "key" && (v == "k-gone" || v == "g-1"),
					lp.GetName() == "model" && v == "m-gone":
					t.Errorf("stale series after the reload: %s %v", f.GetName(), s.GetLabel())
				}
			}
		}
	}
	kept := map[string]string{"route": chat, "team": "kept", "key": "k-kept", "model": "m-kept", "status": "200"}
	if got := counterValue(t, m, "modelgate_requests_total", kept); got != 1 {
		t.Errorf("a kept series lost its count: %v", got)
	}
	if got := counterValue(t, m, "modelgate_tokens_total", map[string]string{"team": "kept", "model": "m-kept", "direction": "input"}); got != 6 {
		t.Errorf("kept tokens = %v, want 6", got)
	}
}

// Requests settled at an estimate are counted by route and reason; the rest are not.
func TestUsageEstimated(t *testing.T) {
	m, _ := servedAll(labelConfig(), []reqlog.RequestSummary{
		{Route: "/v1/responses", Team: "alpha", Key: "alpha-1", Status: 504, UsageEstimated: "no_answer"},
		{Route: "/v1/responses", Team: "alpha", Key: "alpha-1", Status: 504, UsageEstimated: "no_answer"},
		{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Status: 200, UsageEstimated: "early_cut"},
		{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Status: 200},
	})
	if got := counterValue(t, m, "modelgate_usage_estimated_total", map[string]string{"route": "/v1/responses", "reason": "no_answer"}); got != 2 {
		t.Errorf("no_answer = %v, want 2", got)
	}
	if n := seriesCount(t, m, "modelgate_usage_estimated_total"); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
}

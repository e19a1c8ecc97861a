// Package metrics exposes modelgate's Prometheus metrics. It observes requests through the
// proxy's hooks and keeps every label value bounded by the config.
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"modelgate/config"
)

// Metrics holds modelgate's collectors in a private registry, so tests and embedders can run
// several gateways in one process without duplicate-registration panics.
type Metrics struct {
	reg    *prometheus.Registry
	labels atomic.Pointer[labelTable]
	// relabel orders a reload's swap of labels and removal of stale series against requests
	// being counted: one that picked its labels from the old table must not recreate a
	// series the reload has just removed.
	relabel sync.RWMutex

	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	ttfb            *prometheus.HistogramVec
	tokens          *prometheus.CounterVec
	refusals        *prometheus.CounterVec
	shadowRefusals  *prometheus.CounterVec
	storeFailOpen   prometheus.Counter
	upstreamErrors  *prometheus.CounterVec
	upstreamRetries *prometheus.CounterVec
	inFlight        prometheus.Gauge
	openStreams     *prometheus.GaugeVec
	reloads         *prometheus.CounterVec
	lastReload      prometheus.Gauge
	spend           *prometheus.CounterVec
	usageEstimated  *prometheus.CounterVec
	routing         routingMetrics
	// issued names the issued keys (admin API) that label series, a bounded set.
	issued issuedLabels
}

// Latency buckets span a health probe (milliseconds) to a long reasoning stream (minutes).
var (
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	ttfbBuckets     = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// New builds the collectors and registers them, with the Go and process collectors, in a
// fresh registry. cfg decides which model, team and key names may appear as label values.
func New(cfg *config.Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.labels.Store(newLabelTable(cfg))

	m.requests = counterVec("modelgate_requests_total",
		"Requests answered, by route, team, key name, client-facing model and HTTP status.",
		"route", "team", "key", "model", "status")
	m.duration = histogramVec("modelgate_request_duration_seconds",
		"Time from receiving a request to the end of its answer (the whole stream for streams).",
		durationBuckets, "route")
	m.ttfb = histogramVec("modelgate_stream_time_to_first_byte_seconds",
		"Time from receiving a streamed request to its first byte of answer body.",
		ttfbBuckets, "route")
	m.tokens = counterVec("modelgate_tokens_total",
		"Tokens the platform reported (or modelgate counted for cut streams), by team, model and direction (input or output).",
		"team", "model", "direction")
	m.refusals = counterVec("modelgate_limit_refusals_total",
		"Requests refused by a local limit, by team and reason.",
		"team", "reason")
	m.shadowRefusals = counterVec("modelgate_limit_shadow_refusals_total",
		"Requests a team in shadow mode let through that a limit would have refused, by team and reason.",
		"team", "reason")
	m.storeFailOpen = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "modelgate_limit_store_fail_open_total",
		Help: "Requests let through unchecked because the shared limit store was unreachable (on_store_error: allow).",
	})
	m.upstreamErrors = counterVec("modelgate_upstream_errors_total",
		"Requests whose upstream call failed, by route and kind of failure.",
		"route", "kind")
	m.upstreamRetries = counterVec("modelgate_upstream_retries_total",
		"Upstream attempts beyond the first, by route.",
		"route")
	m.inFlight = gauge("modelgate_in_flight_requests",
		"Requests being served right now, streams included.")
	m.openStreams = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "modelgate_open_streams",
		Help: "Streamed answers in progress, by route.",
	}, []string{"route"})
	m.reloads = counterVec("modelgate_config_reloads_total",
		"Config reloads on SIGHUP, by result (applied or rejected).",
		"result")
	m.lastReload = gauge("modelgate_config_last_applied_timestamp_seconds",
		"Unix time the running config was loaded or last reloaded.")
	m.lastReload.SetToCurrentTime()

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.duration, m.ttfb, m.tokens, m.refusals, m.shadowRefusals, m.storeFailOpen,
		m.upstreamErrors, m.upstreamRetries, m.inFlight, m.openStreams, m.reloads, m.lastReload,
	)
	m.spend = counterVec("modelgate_spend_total",
		"What calls cost at the configured model prices, in pricing.currency, by team and client-facing model.",
		"team", "model")
	m.reg.MustRegister(m.spend)
	m.usageEstimated = counterVec("modelgate_usage_estimated_total",
		"Requests the platform may have billed whose usage it did not report, settled at an upper bound (see docs/accounting.md), by route and reason.",
		"route", "reason")
	m.reg.MustRegister(m.usageEstimated)
	m.routing = newRoutingMetrics(m.reg)
	// Both results exist from the start, so an alert on rejected reloads has a series to read.
	m.reloads.WithLabelValues("applied")
	m.reloads.WithLabelValues("rejected")
	return m
}

// Handler serves the registry in the Prometheus text (or negotiated) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the private registry, for tests and for collectors added by the caller.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Reload records an applied config reload and makes its model, team and key names the ones
// labels may carry. Series of teams, keys and models the reload removed are deleted: a
// dashboard must not go on showing a revoked key or a team that is gone, and the number of
// series stays bounded by the running config, not by every config applied since the start.
func (m *Metrics) Reload(cfg *config.Config) {
	next := newLabelTable(cfg)
	m.relabel.Lock()
	prev := m.labels.Swap(next)
	m.dropStale(prev, next)
	m.issued.forgetTeams(next)
	m.relabel.Unlock()
	m.reloads.WithLabelValues("applied").Inc()
	m.lastReload.Set(float64(time.Now().UnixNano()) / 1e9)
}

// ReloadRejected records a reload whose config failed to load; the old config keeps serving.
func (m *Metrics) ReloadRejected() {
	m.reloads.WithLabelValues("rejected").Inc()
}

// dropStale deletes the series of names prev allowed as label values and next does not.
func (m *Metrics) dropStale(prev, next *labelTable) {
	if prev == nil {
		return
	}
	byTeam := []*prometheus.MetricVec{m.requests.MetricVec, m.tokens.MetricVec, m.refusals.MetricVec, m.shadowRefusals.MetricVec}
	for team, keys := range prev.teams {
		kept, ok := next.teams[team]
		if !ok {
			for _, v := range byTeam {
				v.DeletePartialMatch(prometheus.Labels{"team": team})
			}
			continue
		}
		for key := range keys {
			if !kept[key] {
				m.requests.DeletePartialMatch(prometheus.Labels{"team": team, "key": key})
			}
		}
	}
	for model := range prev.models {
		if !next.models[model] {
			m.requests.DeletePartialMatch(prometheus.Labels{"model": model})
			m.tokens.DeletePartialMatch(prometheus.Labels{"model": model})
			m.routing.fallbacks.DeletePartialMatch(prometheus.Labels{"model": model})
			m.routing.fallbacks.DeletePartialMatch(prometheus.Labels{"served_model": model})
			m.routing.routeCalls.DeletePartialMatch(prometheus.Labels{"model": model})
		}
	}
	for model, ups := range prev.routes {
		for up := range ups {
			if !next.routes[model][up] {
				m.routing.routeCalls.DeletePartialMatch(prometheus.Labels{"model": model, "upstream_model": up})
			}
		}
	}
}

// counterVec is a counter of name, with its help and labels, not yet registered.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

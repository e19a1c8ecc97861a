package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/breaker"
)

var breakerStateDesc = prometheus.NewDesc("modelgate_breaker_state",
	"Circuit breaker state by breaker (model:<upstream model> or key:<platform key fingerprint>): 0 closed, 1 half-open, 2 open.",
	[]string{"breaker"}, nil)

// BreakerSource is what the breaker gauge is read from (breaker.Set).
type BreakerSource interface {
	Statuses() []breaker.Status
}

// breakerCollector reads the breakers at scrape time. Their names come from the config
// (upstream models, platform key fingerprints) and the set caps them, so the label stays
// bounded; a fingerprint never reveals its key.
type breakerCollector struct{ src BreakerSource }

func (c breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerStateDesc }

func (c breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.src.Statuses() {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, float64(st.Value()), st.Name)
	}
}

// WatchBreakers exports modelgate_breaker_state as src reports it at scrape time.
func (m *Metrics) WatchBreakers(src BreakerSource) {
	m.reg.MustRegister(breakerCollector{src})
}

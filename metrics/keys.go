package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/reqlog"
)

var (
	keyStateDesc = prometheus.NewDesc("modelgate_upstream_key_state",
		"1 for the state each platform key is in (healthy, cooling or out), by team and key fingerprint; 0 for the others.",
		[]string{"team", "key_fingerprint", "state"}, nil)
	keyInFlightDesc = prometheus.NewDesc("modelgate_upstream_key_in_flight",
		"Upstream calls in flight per platform key, by team and key fingerprint.",
		[]string{"team", "key_fingerprint"}, nil)
)

// keyCollector reads the platform key pools at scrape time: their state changes with every
// answer, and a reload replaces them, so nothing is cached here.
type keyCollector struct{ states func() []reqlog.KeyState }

func (c keyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keyStateDesc
	ch <- keyInFlightDesc
}

func (c keyCollector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range c.states() {
		for _, s := range reqlog.KeyStates() {
			v := 0.0
			if s == k.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(keyStateDesc, prometheus.GaugeValue, v, k.Team, k.Fingerprint, s)
		}
		ch <- prometheus.MustNewConstMetric(keyInFlightDesc, prometheus.GaugeValue, float64(k.InFlight), k.Team, k.Fingerprint)
	}
}

// WatchPlatformKeys exports the platform key pools that states reports (proxy.Server.KeyStates).
func (m *Metrics) WatchPlatformKeys(states func() []reqlog.KeyState) {
	m.reg.MustRegister(keyCollector{states})
}

// WatchHistoryDrops exports how many usage-history rows were given up on after repeated
// write failures (billing.Recorder.DroppedRows): the requests they counted are missing from
// the history, so any increase deserves a look at the store.
func (m *Metrics) WatchHistoryDrops(dropped func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "modelgate_usage_history_rows_dropped_total",
		Help: "Usage-history rows dropped after the store refused them on every flush for five minutes.",
	}, func() float64 { return float64(dropped()) }))
}

// WatchAlertDeliveries exports the alert webhooks' deliveries by outcome: delivered (a 2xx),
// failed (refused, or out of attempts) and dropped (the queue was full, so the event was
// never sent). counts returns the three, in that order (alerts.Sender.Stats).
func (m *Metrics) WatchAlertDeliveries(counts func() (delivered, failed, dropped int64)) {
	for i, outcome := range []string{"delivered", "failed", "dropped"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "modelgate_alert_deliveries_total",
			Help:        "Alert webhook deliveries by outcome: delivered, failed after every attempt or refused, dropped from a full queue.",
			ConstLabels: prometheus.Labels{"outcome": outcome},
		}, func() float64 {
			d, f, x := counts()
			return float64([3]int64{d, f, x}[i])
		}))
	}
}

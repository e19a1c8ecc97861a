package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchInflightBodies exports the room request bodies being read or held and the queued
// WebSocket messages take now, against server.max_inflight_body_bytes (used: the proxy's
// InflightBodyBytes). Read at scrape time: the figure changes with every body.
func (m *Metrics) WatchInflightBodies(used func() int64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "modelgate_inflight_body_bytes",
		Help: "Bytes held by request bodies being read or not yet sent to the platform, and by queued WebSocket messages (bounded by server.max_inflight_body_bytes).",
	}, func() float64 { return float64(used()) }))
}

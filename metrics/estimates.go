package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/calibration"
)

var (
	estimateRatioDesc = prometheus.NewDesc("modelgate_estimate_ratio",
		"Calibrated input tokens per raw estimated token, by client-facing model (1 until the platform has reported usage).",
		[]string{"model"}, nil)
	estimateSpreadDesc = prometheus.NewDesc("modelgate_estimate_spread",
		"Spread of the platform's input tokens around the calibrated estimate (coefficient of variation; 0 until 8 samples), by client-facing model.",
		[]string{"model"}, nil)
	estimateSamplesDesc = prometheus.NewDesc("modelgate_estimate_samples",
		"Answers the calibration of a model is learned from (those of the last three days), by client-facing model.",
		[]string{"model"}, nil)
)

// EstimateSource is what the estimate gauges are read from (calibration.Table).
type EstimateSource interface {
	Models() []calibration.ModelFactor
}

// estimateCollector reads the calibration table at scrape time, so a request pays nothing for
// these series. Only configured models are exported: a passthrough caller can have any model
// name calibrated, and a name from a request must never become a label value. A ratio cannot
// be folded into "other" the way a count can, so the rest are left out (/admin/usage lists
// them).
type estimateCollector struct {
	m   *Metrics
	src EstimateSource
}

func (c estimateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- estimateRatioDesc
	ch <- estimateSpreadDesc
	ch <- estimateSamplesDesc
}

func (c estimateCollector) Collect(ch chan<- prometheus.Metric) {
	labels := c.m.labels.Load()
	for _, mf := range c.src.Models() {
		if !labels.models[mf.Model] {
			continue
		}
		ch <- prometheus.MustNewConstMetric(estimateRatioDesc, prometheus.GaugeValue, mf.Ratio, mf.Model)
		ch <- prometheus.MustNewConstMetric(estimateSpreadDesc, prometheus.GaugeValue, mf.Spread, mf.Model)
		ch <- prometheus.MustNewConstMetric(estimateSamplesDesc, prometheus.GaugeValue, float64(mf.Samples), mf.Model)
	}
}

// WatchEstimates exports each configured model's calibration (modelgate_estimate_ratio,
// _spread and _samples) as src reports it at scrape time.
func (m *Metrics) WatchEstimates(src EstimateSource) {
	m.reg.MustRegister(estimateCollector{m, src})
}

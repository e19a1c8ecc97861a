package metrics

import "github.com/prometheus/client_golang/prometheus"

var storeWriteFailuresDesc = prometheus.NewDesc("modelgate_store_write_failures_total",
	"Writes to the record store that failed, by the feature that wrote (responses, ledger, usage). Stored responses the store refuses are held in memory and retried; /readyz says degraded while writes fail.",
	[]string{"store"}, nil)

// storeWriteCollector reads the failure counts at scrape time. The store label is the fixed
// set of writers the source names (store.Writers), so it stays bounded.
type storeWriteCollector struct {
	failures func(yield func(store string, n uint64))
}

func (c storeWriteCollector) Describe(ch chan<- *prometheus.Desc) { ch <- storeWriteFailuresDesc }

func (c storeWriteCollector) Collect(ch chan<- prometheus.Metric) {
	c.failures(func(store string, n uint64) {
		ch <- prometheus.MustNewConstMetric(storeWriteFailuresDesc, prometheus.CounterValue, float64(n), store)
	})
}

// WatchStoreWrites exports modelgate_store_write_failures_total as failures reports it at
// scrape time: it calls yield once per writer (store.WriteHealth.Failures), every writer
// included, so each series exists from the start at 0.
func (m *Metrics) WatchStoreWrites(failures func(yield func(store string, n uint64))) {
	m.reg.MustRegister(storeWriteCollector{failures})
}

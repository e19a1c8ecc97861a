package metrics

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"modelgate/config"
	"modelgate/reqlog"
)

// keySeries reads the key pool gauges as "team/fingerprint/state" -> value and
// "team/fingerprint" -> calls in flight.
func keySeries(t *testing.T, m *Metrics) (states, inflight map[string]float64) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	states, inflight = map[string]float64{}, map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			switch mf.GetName() {
			case "modelgate_upstream_key_state":
				states[l["team"]+"/"+l["key_fingerprint"]+"/"+l["state"]] = s.GetGauge().GetValue()
			case "modelgate_upstream_key_in_flight":
				inflight[l["team"]+"/"+l["key_fingerprint"]] = s.GetGauge().GetValue()
			}
		}
	}
	return states, inflight
}

func TestPlatformKeyStates(t *testing.T) {
	m := New(&config.Config{})
	states := []reqlog.KeyState{
		{Team: "search", Fingerprint: "0a1b2c3d", State: "healthy", InFlight: 2},
		{Team: "search", Fingerprint: "ffee0011", State: "out"},
	}
	m.WatchPlatformKeys(func() []reqlog.KeyState { return states })
	got, inflight := keySeries(t, m)
	want := map[string]float64{
		"search/0a1b2c3d/healthy": 1, "search/0a1b2c3d/cooling": 0, "search/0a1b2c3d/out": 0,
		"search/ffee0011/healthy": 0, "search/ffee0011/cooling": 0, "search/ffee0011/out": 1,
	}
	if len(got) != len(want) {
		t.Errorf("series = %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if inflight["search/0a1b2c3d"] != 2 || len(inflight) != 2 {
		t.Errorf("in flight = %v", inflight)
	}
	// A reload that changes the keys shows at the next scrape.
	states = states[:1]
	if got, _ := keySeries(t, m); len(got) != 3 {
		t.Errorf("after the pool shrank: %v", got)
	}
}

func TestHistoryDropsExported(t *testing.T) {
	m := New(nil)
	var n int64 = 3
	m.WatchHistoryDrops(func() int64 { return n })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "modelgate_usage_history_rows_dropped_total 3") {
		t.Fatalf("metrics:\n%s", rec.Body.String())
	}
}

func TestAlertDeliveriesExported(t *testing.T) {
	m := New(config.Default())
	m.WatchAlertDeliveries(func() (int64, int64, int64) { return 5, 2, 1 })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`modelgate_alert_deliveries_total{outcome="delivered"} 5`,
		`modelgate_alert_deliveries_total{outcome="failed"} 2`,
		`modelgate_alert_deliveries_total{outcome="dropped"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("no %q in:\n%s", want, rec.Body.String())
		}
	}
}

// TestStoreWriteFailuresExported: every writer's series is exported, with its count as the
// source reports it at scrape time.
func TestStoreWriteFailuresExported(t *testing.T) {
	m := New(config.Default())
	n := uint64(0)
	m.WatchStoreWrites(func(yield func(string, uint64)) {
		yield("responses", n)
		yield("ledger", 0)
		yield("usage", 0)
	})
	for _, n = range []uint64{0, 7} {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		for _, want := range []string{
			`modelgate_store_write_failures_total{store="responses"} ` + strconv.FormatUint(n, 10),
			`modelgate_store_write_failures_total{store="ledger"} 0`,
			`modelgate_store_write_failures_total{store="usage"} 0`,
		} {
			if !strings.Contains(rec.Body.String(), want+"\n") {
				t.Fatalf("no %q in:\n%s", want, rec.Body.String())
			}
		}
	}
}

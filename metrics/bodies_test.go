package metrics

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"modelgate/config"
)

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

package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// An n>1 chat stream relays each choice the way the single-choice relay does: events read
// in place and chunks written from lent buffers, so neither an event nor a chunk costs an
// allocation. sim-long streams 200 text deltas per choice; the second choice may add the
// fixed cost of a second upstream call and of the merge, not a cost per event.
func TestMergedChatStreamAllocations(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts: not in -short, and pools drop buffers on purpose under -race")
	}
	h := newBenchServer(t, benchUpstream(t, "sim-long"))
	const msgs = `"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]`
	allocs := func(n string) float64 {
		body := []byte(`{"model":"sim-long","stream":true,"n":` + n + `,` + msgs + `}`)
		w := &discardWriter{h: http.Header{}}
		return testing.AllocsPerRun(10, func() {
			clear(w.h)
			w.status, w.n = 0, 0
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", io.NopCloser(bytes.NewReader(body)))
			req.Header.Set("Authorization", "Bearer mg-bench-key-1")
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK || w.n < 200*100 {
				t.Fatalf("n=%s: status %d, %d bytes", n, w.status, w.n)
			}
		})
	}
	one, two := allocs("1"), allocs("2")
	t.Logf("allocations per request: n=1 %.0f, n=2 %.0f", one, two)
	if extra := two - one; extra > 200 {
		t.Errorf("the second choice costs %.0f allocations: more than one per event of its 200 deltas", extra)
	}
}

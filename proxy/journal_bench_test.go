package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/journal"
)

// BenchmarkJournal is the chat route with the admission journal off and on (its segment
// file in the data path, mapped: each admission a copy into it): the cost of writing each
// admission before its call leaves. "serial" is one client at a time; "parallel" is
// GOMAXPROCS×4 clients, whose admissions take the journal's lock in turn.
//
//	go test ./proxy -run '^$' -bench Journal -benchmem -count 6
func BenchmarkJournal(b *testing.B) {
	up := benchUpstream(b, "")
	const body = `{"model":"bench","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`
	for _, kind := range []string{"off", "file"} {
		b.Run(kind+"/serial", func(b *testing.B) {
			benchRoute(b, newJournalBenchServer(b, up, kind), "/v1/chat/completions", body, 100)
		})
		b.Run(kind+"/parallel", func(b *testing.B) {
			h := newJournalBenchServer(b, up, kind)
			b.SetParallelism(4)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchOnce(b, h, "/v1/chat/completions", body)
				}
			})
		})
	}
}

func newJournalBenchServer(b *testing.B, up http.RoundTripper, kind string) http.Handler {
	b.Helper()
	d := benchDeps(b, up, "")
	if kind == "off" {
		return benchServer(b, d).Handler()
	}
	j, err := journal.Open(b.TempDir(), "0123456789abcdef", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(j.Close)
	d.Journal = j
	return benchServer(b, d).Handler()
}

// benchOnce sends one request to h and fails b unless it is answered 200.
func benchOnce(b *testing.B, h http.Handler, path, body string) {
	w := &discardWriter{h: http.Header{}}
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer mg-bench-key-1")
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, req)
	if w.status != http.StatusOK {
		b.Errorf("status %d", w.status)
	}
}

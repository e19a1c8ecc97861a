package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelgate/billing"
)

// attrCostCase is one side of the attribution cost comparison: the same bytes either way,
// "none" under field and header names modelgate does not read, "recorded" under the real
// ones with usage.tag_keys set, so the difference is what recording costs.
type attrCostCase struct{ name, fields, extra, header string }

func attrCostCases() []attrCostCase {
	const meta = `"user":"end-user-4711","metadata":{"feature":"search","customer":"acme"},`
	decoy := strings.NewReplacer(`"user"`, `"uzer"`, `"metadata"`, `"metadaty"`).Replace(meta)
	return []attrCostCase{
		{"none", decoy, "", "X-Modelgate-Tagz"},
		{"recorded", meta, "usage:\n  tag_keys: [feature, customer, experiment]\n", "X-Modelgate-Tags"},
	}
}

// attrCostServer is a server with a usage history and the access log in its default text
// format, the request of case c, and the writer its answers go to.
func attrCostServer(tb testing.TB, up http.RoundTripper, c attrCostCase) (http.Handler, string) {
	d := benchDeps(tb, up, c.extra)
	d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d.History = billing.NewRecorder(nil, time.Hour, time.Now, nil)
	h := benchServer(tb, d).Handler()
	hh := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(c.header, "experiment=b")
		h.ServeHTTP(w, r)
	})
	return hh, `{` + c.fields + `"model":"bench","input":"Write one short sentence about benchmarks."}`
}

// BenchmarkAttributionCost is a Responses call through a server with a usage history and a
// text access log (the default format), sent the same bytes either way: "none" records no
// tags and names no end user (the fields under names modelgate does not read), "recorded"
// records both.
func BenchmarkAttributionCost(b *testing.B) {
	minimal := benchUpstream(b, "")
	for _, c := range attrCostCases() {
		b.Run(c.name, func(b *testing.B) {
			h, body := attrCostServer(b, minimal, c)
			benchRoute(b, h, "/v1/responses", body, 100)
		})
	}
}

// BenchmarkAttributionCostChat is BenchmarkAttributionCost on Chat Completions, whose
// parse reads the end user and the metadata (translate.Identity) instead of the Responses
// check.
func BenchmarkAttributionCostChat(b *testing.B) {
	minimal := benchUpstream(b, "")
	for _, c := range attrCostCases() {
		b.Run(c.name, func(b *testing.B) {
			h, _ := attrCostServer(b, minimal, c)
			body := `{` + c.fields + `"model":"bench","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`
			benchRoute(b, h, "/v1/chat/completions", body, 100)
		})
	}
}

// maxAttributionAllocs is what recording an end user and three tags (body metadata and
// the tags header) may allocate beyond a request that records none: one buffer holds the
// end user's and the tags' labels.
const maxAttributionAllocs = 1

// TestAttributionAllocs pins what recording attribution allocates on a whole request, so
// the cost measured by BenchmarkAttributionCost cannot creep back.
func TestAttributionAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("measures allocations of whole requests")
	}
	minimal := benchUpstream(t, "")
	allocs := map[string]float64{}
	for _, c := range attrCostCases() {
		h, body := attrCostServer(t, minimal, c)
		w := &discardWriter{h: http.Header{}}
		payload := []byte(body)
		req := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
		req.Header.Set("Authorization", "Bearer mg-bench-key-1")
		req.Header.Set("Content-Type", "application/json")
		rd := bytes.NewReader(payload)
		serve := func() {
			clear(w.h)
			w.status, w.n = 0, 0
			rd.Reset(payload)
			req.Body, req.ContentLength = io.NopCloser(rd), int64(len(payload))
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				t.Fatalf("%s: status %d", c.name, w.status)
			}
		}
		for range 20 { // warm the pools, the history's rows and the limiter's scopes
			serve()
		}
		allocs[c.name] = testing.AllocsPerRun(200, serve)
	}
	// AllocsPerRun truncates an average: a stray allocation of another goroutine (the
	// runtime's, a timer's) now and then does not move it.
	if extra := allocs["recorded"] - allocs["none"]; extra > maxAttributionAllocs {
		t.Fatalf("recording attribution allocates %.0f times per request (none %.0f, recorded %.0f); at most %d",
			extra, allocs["none"], allocs["recorded"], maxAttributionAllocs)
	}
}

// BenchmarkAttributionCostStream is BenchmarkAttributionCost on streamed answers, Responses
// and Chat Completions: the end user and the tags ride the request record to the stream's
// settlement, which a non-stream call reaches by another path.
func BenchmarkAttributionCostStream(b *testing.B) {
	minimal := benchUpstream(b, "")
	for _, route := range []struct{ name, path, rest string }{
		{"responses", "/v1/responses", `"model":"bench","input":"Write one short sentence about benchmarks.","stream":true}`},
		{"chat", "/v1/chat/completions", `"model":"bench","stream":true,"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`},
	} {
		for _, c := range attrCostCases() {
			b.Run(route.name+"/"+c.name, func(b *testing.B) {
				h, _ := attrCostServer(b, minimal, c)
				benchRoute(b, h, route.path, `{`+c.fields+route.rest, 100)
			})
		}
	}
}

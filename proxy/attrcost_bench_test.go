package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/billing"
)

// BenchmarkAttributionCost is a Responses call through a server with a usage history and a
// JSON access log, sent the same bytes either way: "none" records no tags and names no end
// user (the fields under names modelgate does not read), "recorded" records both.
func BenchmarkAttributionCost(b *testing.B) {
	minimal := benchUpstream(b, "")
	const meta = `"user":"end-user-4711","metadata":{"feature":"search","customer":"acme"},`
	decoy := strings.NewReplacer(`"user"`, `"uzer"`, `"metadata"`, `"metadaty"`).Replace(meta)
	for _, c := range []struct {
		name, fields, extra, header string
	}{
		{"none", decoy, "", "X-Modelgate-Tagz"},
		{"recorded", meta, "usage:\n  tag_keys: [feature, customer, experiment]\n", "X-Modelgate-Tags"},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := benchDeps(b, minimal, c.extra)
			d.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
			d.History = billing.NewRecorder(nil, time.Hour, time.Now, nil)
			h := benchServer(b, d).Handler()
			hh := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Header.Set(c.header, "experiment=b")
				h.ServeHTTP(w, r)
			})
			benchRoute(b, hh, "/v1/responses", `{`+c.fields+`"model":"bench","input":"Write one short sentence about benchmarks."}`, 100)
		})
	}
}

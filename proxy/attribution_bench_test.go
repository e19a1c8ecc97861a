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

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/reqlog"
)

// BenchmarkAttribution is a whole non-stream request on the minimal platform, with and
// without attribution (issue 28): "plain" names no end user and no tags; "user_tags" names
// an end user and two metadata tags, with usage.tag_keys set; "header" adds the tags header;
// "enduser_limits" is user_tags with the team's end-user limits enforced as well. The
// difference to plain is what recording tags and users costs a request.
func BenchmarkAttribution(b *testing.B) {
	const tagKeys = "usage:\n  tag_keys: [feature, customer]\n"
	routes := []struct{ name, path, plain, tagged string }{
		{"chat", "/v1/chat/completions",
			`{"model":"bench","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`,
			`{"model":"bench","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}],"user":"user-4242","metadata":{"feature":"search","customer":"acme"}}`},
		{"responses", "/v1/responses",
			`{"model":"bench","input":"Write one short sentence about benchmarks."}`,
			`{"model":"bench","input":"Write one short sentence about benchmarks.","user":"user-4242","metadata":{"feature":"search","customer":"acme"}}`},
	}
	up := benchUpstream(b, "")
	for _, r := range routes {
		cases := []struct {
			name, extra, body, header string
		}{
			{"plain", "", r.plain, ""},
			{"user_tags", tagKeys, r.tagged, ""},
			{"header", tagKeys, r.tagged, "feature=batch,customer=beta"},
			{"enduser_limits", tagKeys, r.tagged, ""},
		}
		for _, c := range cases {
			b.Run(r.name+"/"+c.name, func(b *testing.B) {
				d := benchDeps(b, up, c.extra)
				if c.name == "enduser_limits" {
					// auth reads the limits when it is built: build it again.
					d.Config.Teams[0].EndUserLimits.RequestsPerMinute = 100_000_000
					d.Config.Teams[0].EndUserLimits.TokensPerDay = 100_000_000_000
					a, err := auth.New(d.Config)
					if err != nil {
						b.Fatal(err)
					}
					d.Auth = a
				}
				h := benchServer(b, d).Handler()
				benchRouteHeader(b, h, r.path, c.body, c.header)
			})
		}
	}
}

// benchRouteHeader is benchRoute with the tags header set (when header is not "").
func benchRouteHeader(b *testing.B, h http.Handler, path, body, header string) {
	b.Helper()
	req := benchRequest(path)
	if header != "" {
		req.Header.Set(reqlog.TagsHeader, header)
	}
	serveLoop(b, h, req, []byte(body), 100)
}

// BenchmarkAttribute is the preflight's attribution step alone (attribute): what a request
// that names an end user and tags costs beside one that names none, over the parse and the
// rest of the request (BenchmarkAttribution).
func BenchmarkAttribute(b *testing.B) {
	st := &state{tagKeys: []string{"customer", "feature"}}
	p := &auth.Principal{Team: "bench", Tags: map[string]string{"feature": "default"}}
	cases := []struct{ name, user, metadata, header string }{
		{"none", "", "", ""},
		{"user", "user-4242", "", ""},
		{"user_metadata", "user-4242", `{"feature":"search","customer":"acme"}`, ""},
		{"user_metadata_header", "user-4242", `{"feature":"search","customer":"acme"}`, "feature=batch,customer=beta"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c, _ := gin.CreateTestContext(httptest.NewRecorder())
			c.Request = httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
			if tc.header != "" {
				c.Request.Header.Set(reqlog.TagsHeader, tc.header)
			}
			c.Set(principalKey, p)
			ri := info(c)
			ri.principal = p
			b.ReportAllocs()
			for b.Loop() {
				ri.EndUser, ri.Tags = "", ""
				if !attribute(c, st, tc.user, tc.metadata) {
					b.Fatal("refused")
				}
			}
		})
	}
}

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
	if testing.Short() || raceEnabled {
		// Under the race detector sync.Pool drops a share of what is put back, so the two
		// sides' counts differ by chance; .ci/run runs this without it.
		t.Skip("measures allocations of whole requests, without the race detector")
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

package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
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
		req.Header.Set(tagsHeader, header)
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
				c.Request.Header.Set(tagsHeader, tc.header)
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

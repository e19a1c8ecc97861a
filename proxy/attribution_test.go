package proxy

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/jobs"
	"modelgate/reqlog"
)

// summaries collects the finished requests' summaries by request id.
type summaries struct {
	mu   sync.Mutex
	done map[string]reqlog.RequestSummary
}

func (s *summaries) hooks() reqlog.Hooks {
	s.done = map[string]reqlog.RequestSummary{}
	return reqlog.Hooks{RequestStarted: func() {}, RequestDone: func(r reqlog.RequestSummary) {
		s.mu.Lock()
		s.done[r.ClientRequestID] = r // the X-Request-Id each test sends
		s.mu.Unlock()
	}}
}

// wait polls (bounded) for the summary of the request sent with X-Request-Id id: a stream's
// handler may end just after its client read the last byte.
func (s *summaries) wait(t *testing.T, id string) reqlog.RequestSummary {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		r, ok := s.done[id]
		s.mu.Unlock()
		if ok {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no summary for %s", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// tagConfig records feature and customer, and gives key alpha-1 default tags.
func tagConfig(c *config.Config) {
	c.Usage.TagKeys = []string{"feature", "customer"}
	c.Teams[0].Keys[0].Tags = map[string]string{"feature": "default-feature", "customer": "default-customer", "unlisted": "x"}
}

// TestAttributionEveryRoute: each route, streamed and not, records the end user its body
// names and the allow-listed tags, the header's over the metadata's over the key's
// defaults; what the record holds is what accounting settles and the log line says.
func TestAttributionEveryRoute(t *testing.T) {
	var sums summaries
	env := startEnv(t, envOptions{mutate: tagConfig, hooks: sums.hooks()})
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body, header string
		key                      string
		user, tags               string
	}{
		{"chat", "/v1/chat/completions", `{"model":"sim-chat",` + msgs + `,"user":"u-1","metadata":{"customer":"acme","other":"dropped"}}`, "feature=search",
			keyAlpha1, "u-1", "customer:acme,feature:search"},
		{"chat safety_identifier", "/v1/chat/completions", `{"model":"sim-chat",` + msgs + `,"safety_identifier":"s/2"}`, "",
			keyAlpha1, "s%2F2", "customer:default-customer,feature:default-feature"},
		{"chat user over safety_identifier", "/v1/chat/completions", `{"model":"sim-chat",` + msgs + `,"safety_identifier":"s","user":"u"}`, "",
			keyAlpha2, "u", ""},
		{"messages", "/v1/messages", `{"model":"sim-chat","max_tokens":32,` + msgs + `,"metadata":{"user_id":"anthropic-user"}}`, "customer=beta co",
			keyAlpha1, "anthropic-user", "customer:beta%20co,feature:default-feature"},
		{"responses", "/v1/responses", `{"model":"sim-chat","input":"hi","user":"r-user","metadata":{"feature":"summarize","customer":"c1"}}`, "",
			keyAlpha1, "r-user", "customer:c1,feature:summarize"},
		{"responses header wins", "/v1/responses", `{"model":"sim-chat","input":"hi","metadata":{"feature":"summarize"}}`, "feature=h",
			keyAlpha2, "", "feature:h"},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			name := tc.name + "/stream=" + strconv.FormatBool(stream)
			t.Run(name, func(t *testing.T) {
				body := tc.body
				if stream {
					body = strings.Replace(body, "{", `{"stream":true,`, 1)
				}
				id := "req_attr_" + strings.NewReplacer(" ", "_", "/", "_", "=", "_").Replace(name)
				hdr := []string{"X-Request-Id", id}
				if tc.header != "" {
					hdr = append(hdr, "X-Modelgate-Tags", tc.header)
				}
				status, _, b := env.do(t, http.MethodPost, tc.path, tc.key, []byte(body), hdr...)
				if status != 200 {
					t.Fatalf("%d %s", status, b)
				}
				got := sums.wait(t, id)
				if got.EndUser != tc.user || got.Tags != tc.tags {
					t.Fatalf("end user %q tags %q, want %q %q", got.EndUser, got.Tags, tc.user, tc.tags)
				}
				if got.InputTokens == 0 {
					t.Fatalf("the summary is not the settled record's: %+v", got)
				}
			})
		}
	}
	// The access log line names them too, as labels.
	if logs := env.logs.String(); !strings.Contains(logs, `"end_user":"s%2F2"`) || !strings.Contains(logs, `"tags":"customer:acme,feature:search"`) {
		t.Fatalf("the log line misses the attribution:\n%s", logs)
	}
}

// TestNoTagKeysRecordsNoTags: without usage.tag_keys no tags are recorded (a header is still
// checked), while the end user is.
func TestNoTagKeysRecordsNoTags(t *testing.T) {
	var sums summaries
	env := startEnv(t, envOptions{hooks: sums.hooks()})
	status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi","user":"u","metadata":{"feature":"x"}}`),
		"X-Request-Id", "req_no_tag_keys", "X-Modelgate-Tags", "feature=search")
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	if got := sums.wait(t, "req_no_tag_keys"); got.Tags != "" || got.EndUser != "u" {
		t.Fatalf("tags %q end user %q, want none and u", got.Tags, got.EndUser)
	}
	status, _, b = env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`), "X-Modelgate-Tags", "feature")
	if status != 400 {
		t.Fatalf("a malformed header without tag_keys: %d %s", status, b)
	}
}

// TestAttributionRefusals: tags past the bounds, or a malformed header, are a 400 in the
// route's shape, and nothing reaches the platform.
func TestAttributionRefusals(t *testing.T) {
	env := startEnv(t, envOptions{mutate: tagConfig})
	var pairs []string
	for i := range 17 {
		pairs = append(pairs, `"k`+strconv.Itoa(i)+`":"v"`)
	}
	seventeen := "{" + strings.Join(pairs, ",") + "}"
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body, header string
		shape                    string // a part of the answer
	}{
		{"chat header", "/v1/chat/completions", `{"model":"sim-chat",` + msgs + `}`, "feature", `"param":"x-modelgate-tags"`},
		{"chat header seventeen", "/v1/chat/completions", `{"model":"sim-chat",` + msgs + `}`, strings.Repeat("a=b,", 16) + "c=d", `"code":"invalid_tags"`},
		{"chat metadata seventeen", "/v1/chat/completions", `{"model":"sim-chat",` + msgs + `,"metadata":` + seventeen + `}`, "", `"param":"metadata"`},
		{"chat metadata long value", "/v1/chat/completions", `{"model":"sim-chat",` + msgs + `,"metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, "", `"param":"metadata"`},
		{"responses header", "/v1/responses", `{"model":"sim-chat","input":"hi"}`, "a=1,a=2", `"param":"x-modelgate-tags"`},
		{"responses header long key", "/v1/responses", `{"model":"sim-chat","input":"hi"}`, strings.Repeat("k", 65) + "=v", `"type":"invalid_request_error"`},
		{"responses metadata seventeen", "/v1/responses", `{"model":"sim-chat","input":"hi","stream":true,"metadata":` + seventeen + `}`, "", `"param":"metadata"`},
		{"responses metadata twice", "/v1/responses", `{"model":"sim-chat","input":"hi","metadata":{},"metadata":{"a":"b"}}`, "", `"code":"duplicate_parameter"`},
		{"messages header", "/v1/messages", `{"model":"sim-chat","max_tokens":8,` + msgs + `}`, ",", `{"type":"error","error":{"type":"invalid_request_error"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.header != "" {
				hdr = []string{"X-Modelgate-Tags", tc.header}
			}
			status, _, b := env.do(t, http.MethodPost, tc.path, keyAlpha1, []byte(tc.body), hdr...)
			if status != 400 || !bytes.Contains(b, []byte(tc.shape)) {
				t.Fatalf("%d %s, want 400 with %s", status, b, tc.shape)
			}
		})
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Fatalf("%d calls reached the platform", n)
	}
}

// TestTagsHeaderNotForwarded: the platform gets the same request with and without the tags
// header, byte for byte, and never the header; the metadata goes as it went before.
func TestTagsHeaderNotForwarded(t *testing.T) {
	env := startEnv(t, envOptions{mutate: tagConfig})
	for _, route := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"user":"u","metadata":{"feature":"f"}}`},
		{"/v1/responses", `{"model":"sim-chat","input":"hi","user":"u","metadata":{"feature":"f"}}`},
		{"/v1/messages", `{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u"}}`},
	} {
		var bodies [2][]byte
		for i, hdr := range [][]string{nil, {"X-Modelgate-Tags", "feature=search,customer=acme"}} {
			env.sim.Reset()
			status, _, b := env.do(t, http.MethodPost, route.path, keyAlpha1, []byte(route.body), hdr...)
			if status != 200 {
				t.Fatalf("%s: %d %s", route.path, status, b)
			}
			reqs := env.sim.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%s: %d upstream calls", route.path, len(reqs))
			}
			if v := reqs[0].Header.Get("X-Modelgate-Tags"); v != "" {
				t.Fatalf("%s: the tags header was forwarded: %q", route.path, v)
			}
			bodies[i] = reqs[0].Body
		}
		if !bytes.Equal(bodies[0], bodies[1]) {
			t.Fatalf("%s: the upstream body changed with the header:\n%s\n%s", route.path, bodies[0], bodies[1])
		}
		if route.path != "/v1/messages" && !bytes.Contains(bodies[0], []byte(`"metadata":{"feature":"f"}`)) {
			t.Fatalf("%s: the metadata is not forwarded as before: %s", route.path, bodies[0])
		}
	}
}

// TestMetadataBoundsMatchHeaderBounds: the body's metadata and the header are bounded alike.
func TestMetadataBoundsMatchHeaderBounds(t *testing.T) {
	if reqlog.MaxTags != 16 || reqlog.MaxTagKeyChars != 64 || reqlog.MaxTagValueChars != 512 {
		t.Fatal("the header's bounds are not OpenAI's metadata bounds")
	}
}

// TestAttributionBackground: a background response's job, which settles and bills the call
// after the request has been answered, carries the request's end user and tags.
func TestAttributionBackground(t *testing.T) {
	jobDone := make(chan reqlog.RequestSummary, 1)
	hooks := reqlog.Hooks{RequestStarted: func() {}, RequestDone: func(r reqlog.RequestSummary) {
		if r.Route == jobs.Route {
			jobDone <- r
		}
	}}
	env := bgEnv(t, tagConfig, hooks)
	status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1,
		[]byte(`{"model":"sim-chat","input":"hello","background":true,"user":"bg/user","metadata":{"customer":"acme"}}`),
		"X-Modelgate-Tags", "feature=batch")
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	pollUntil(t, env, keyAlpha1, gjson.GetBytes(b, "id").Str, "completed")
	select {
	case r := <-jobDone:
		if r.EndUser != "bg%2Fuser" || r.Tags != "customer:acme,feature:batch" || r.OutputTokens == 0 {
			t.Fatalf("the job's summary: end user %q tags %q output %d", r.EndUser, r.Tags, r.OutputTokens)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job never reported its end")
	}
	if logs := env.logs.String(); !strings.Contains(logs, `"msg":"background response"`) || !strings.Contains(logs, `"end_user":"bg%2Fuser"`) {
		t.Fatalf("the job's log line misses the attribution:\n%s", logs)
	}
}

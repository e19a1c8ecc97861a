package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/store"
	"modelgate/testclock"
	"modelgate/tracing"
	"modelgate/tracing/tracingtest"
	"modelgate/upstream"
)

// fallbackYAML: big falls back to small, then to wide (the one with a larger context
// window); team beta may not use small. No retries, so one scripted failure fails an attempt.
const fallbackYAML = apitest.SimUpstreamYAML + `  max_retries: 0
models:
  - id: big
    upstream: sim-big
    context_window: 8000
    fallbacks: [small, wide]
    first_token_timeout: 300ms
    price: {input: 10, output: 30}
  - id: small
    upstream: sim-small
    context_window: 4000
    first_token_timeout: 1s
    price: {input: 1, output: 2}
  - id: wide
    upstream: sim-wide
    context_window: 128000
    price: {input: 5, output: 15}
teams:
  - name: alpha
    keys:
      - name: alpha-1
        key: mg-alpha-key-1
  - name: beta
    models: [big, wide]
    keys:
      - name: beta-1
        key: mg-beta-key-1
admin_keys: [mg-admin-key]
`

// fallbackRoute is a model route asked for model big, streamed or not.
type fallbackRoute struct {
	name, path, body string
	stream           bool
}

var fallbackRoutes = []fallbackRoute{
	{"responses", "/v1/responses", `{"model":"big","input":"hello"}`, false},
	{"responses_stream", "/v1/responses", `{"model":"big","input":"hello","stream":true}`, true},
	{"chat", "/v1/chat/completions", `{"model":"big","messages":[{"role":"user","content":"hello"}]}`, false},
	{"chat_stream", "/v1/chat/completions", `{"model":"big","messages":[{"role":"user","content":"hello"}],"stream":true}`, true},
	{"messages", "/v1/messages", `{"model":"big","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`, false},
	{"messages_stream", "/v1/messages", `{"model":"big","max_tokens":64,"messages":[{"role":"user","content":"hello"}],"stream":true}`, true},
}

// streamEnd is how each route's stream of a whole answer ends.
var streamEnd = map[string]string{
	"/v1/responses":        "response.completed",
	"/v1/chat/completions": "[DONE]",
	"/v1/messages":         "message_stop",
}

func fallbackEnv(t *testing.T, o envOptions) *testEnv {
	t.Helper()
	o.yaml = fallbackYAML
	mutate := o.mutate
	o.mutate = func(c *config.Config) {
		c.Upstream.ResponseHeaderTimeout = 300 * time.Millisecond
		if mutate != nil {
			mutate(c)
		}
	}
	env := startEnv(t, o)
	t.Cleanup(env.server.Close)
	return env
}

// upstreamModels lists the platform models the sim was asked for, in order.
func upstreamModels(env *testEnv) []string {
	var out []string
	for _, r := range env.sim.Requests() {
		if r.Path == "/v1/responses" {
			out = append(out, gjson.GetBytes(r.Body, "model").Str)
		}
	}
	return out
}

// The triggers of a fallback chain, per route, streamed and not: each failure of big before
// the first byte is served by the fallback the trigger names, the answer says so in
// x-modelgate-served-model, and a body that names the model names the one asked for.
func TestFallbackTriggers(t *testing.T) {
	triggers := []struct {
		name       string
		reply      platformsim.Reply
		streamOnly bool   // a stall is about output events: only streamed calls are watched
		served     string // the fallback that serves
		upstream   string // its platform name
	}{
		{"500", platformsim.Reply{Status: 500, Body: errorJSON("server_error", "server_error", "boom")}, false, "small", "sim-small"},
		{"503", platformsim.Reply{Status: 503, Body: errorJSON("server_error", "server_is_overloaded", "busy")}, false, "small", "sim-small"},
		{"429_pool_exhausted", platformsim.Reply{Status: 429, Header: map[string]string{"Retry-After": "0"}, Body: errorJSON("requests", "rate_limit_exceeded", "slow down")}, false, "small", "sim-small"},
		{"first_byte_timeout", platformsim.Reply{Fault: platformsim.FaultStallBeforeHeaders}, false, "small", "sim-small"},
		{"context_window", platformsim.ContextLengthReply(), false, "wide", "sim-wide"},
		{"stall_before_first_token", platformsim.Reply{AfterEvents: 1, Silence: time.Hour}, true, "small", "sim-small"},
	}
	for _, tr := range triggers {
		for _, rt := range fallbackRoutes {
			if tr.streamOnly && !rt.stream {
				continue
			}
			t.Run(tr.name+"/"+rt.name, func(t *testing.T) {
				env := fallbackEnv(t, envOptions{})
				env.sim.SetModelScript("sim-big", tr.reply)
				h, b := env.post(t, rt.path, keyAlpha1, []byte(rt.body), 200)
				if got := h.Get(servedModelHeader); got != tr.served {
					t.Errorf("served model header %q, want %q", got, tr.served)
				}
				if got := upstreamModels(env); len(got) != 2 || got[0] != "sim-big" || got[1] != tr.upstream {
					t.Errorf("platform calls %v, want sim-big then %s", got, tr.upstream)
				}
				if !rt.stream && rt.path != "/v1/responses" {
					if m := gjson.GetBytes(b, "model").Str; m != "big" {
						t.Errorf("body model %q, want the model asked for", m)
					}
				}
				if rt.stream && !bytes.Contains(b, []byte(streamEnd[rt.path])) {
					t.Errorf("stream does not end as a whole answer does: %s", tail(b))
				}
				line := requestLine(t, env)
				if line.Get("served_model").Str != tr.served || line.Get("model").Str != "big" {
					t.Errorf("access log model %q served %q", line.Get("model").Str, line.Get("served_model").Str)
				}
				if line.Get("attempts").Int() != 2 {
					t.Errorf("access log attempts %d, want both models' attempts", line.Get("attempts").Int())
				}
			})
		}
	}
}

// requestLine is the access log's one request line.
func requestLine(t *testing.T, env *testEnv) gjson.Result {
	t.Helper()
	var found gjson.Result
	ok := waitFor(5*time.Second, func() bool {
		for _, l := range strings.Split(env.logs.String(), "\n") {
			if r := gjson.Parse(l); r.Get("msg").Str == "request" {
				found = r
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no request line: %s", env.logs.String())
	}
	return found
}

// A stream that fails after its first byte reached the client is reported as today: no
// fallback, one platform call, no served-model header.
func TestNoFallbackAfterFirstByte(t *testing.T) {
	for _, rt := range fallbackRoutes {
		if !rt.stream {
			continue
		}
		t.Run(rt.name, func(t *testing.T) {
			env := fallbackEnv(t, envOptions{})
			env.sim.SetModelScript("sim-big", platformsim.Reply{Fault: platformsim.FaultResetMidStream, AfterEvents: 5})
			status, h, b := env.do(t, "POST", rt.path, keyAlpha1, []byte(rt.body))
			if status != 200 || !bytes.Contains(b, []byte("error")) {
				t.Fatalf("status %d, want a stream ending in an error: %s", status, tail(b))
			}
			if got := upstreamModels(env); len(got) != 1 {
				t.Errorf("platform calls %v, want sim-big alone", got)
			}
			if h.Get(servedModelHeader) != "" {
				t.Errorf("served model header %q on an answer big served", h.Get(servedModelHeader))
			}
		})
	}
}

// A failure a fallback cannot help (the client's own 400) and a chain with nothing left go to
// the client as they are; a context-window error with no larger fallback is answered as the
// platform's 400.
func TestFallbackStays(t *testing.T) {
	cases := []struct {
		name   string
		script map[string][]platformsim.Reply
		status int
		code   string
		calls  int
		served string
	}{
		{"client_error", map[string][]platformsim.Reply{"sim-big": {{Status: 400, Body: errorJSON("invalid_request_error", "invalid_value", "no")}}}, 400, "invalid_value", 1, ""},
		{"all_fail", map[string][]platformsim.Reply{
			"sim-big":   {{Status: 500, Body: errorJSON("server_error", "server_error", "a")}},
			"sim-small": {{Status: 500, Body: errorJSON("server_error", "server_error", "b")}},
			"sim-wide":  {{Status: 502, Body: errorJSON("server_error", "server_error", "c")}},
		}, 502, "server_error", 3, "wide"},
		{"no_larger_window", map[string][]platformsim.Reply{
			"sim-big":  {platformsim.ContextLengthReply()},
			"sim-wide": {platformsim.ContextLengthReply()},
		}, 400, "context_length_exceeded", 2, "wide"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := fallbackEnv(t, envOptions{})
			for m, rs := range c.script {
				env.sim.SetModelScript(m, rs...)
			}
			status, h, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(fallbackRoutes[2].body))
			if status != c.status || gjson.GetBytes(b, "error.code").Str != c.code {
				t.Fatalf("%d %s, want %d %s", status, b, c.status, c.code)
			}
			if got := upstreamModels(env); len(got) != c.calls {
				t.Errorf("platform calls %v, want %d", got, c.calls)
			}
			if h.Get(servedModelHeader) != c.served {
				t.Errorf("served model header %q, want %q", h.Get(servedModelHeader), c.served)
			}
		})
	}
}

// bigFailsWideServes makes sim-big fail and checks that key's chat call on fallbackRoutes[2]
// is served by wide, after one call to sim-big.
func bigFailsWideServes(t *testing.T, env *testEnv, key string) {
	t.Helper()
	env.sim.SetModelScript("sim-big", platformsim.Reply{Status: 500, Body: errorJSON("server_error", "server_error", "boom")})
	status, h, b := env.do(t, "POST", "/v1/chat/completions", key, []byte(fallbackRoutes[2].body))
	if status != 200 || h.Get(servedModelHeader) != "wide" {
		t.Fatalf("%d served by %q: %s", status, h.Get(servedModelHeader), b)
	}
	if got := upstreamModels(env); len(got) != 2 || got[1] != "sim-wide" {
		t.Errorf("platform calls %v, want sim-big then sim-wide", got)
	}
}

// A fallback the caller's team may not use is skipped: beta may use big and wide, not small.
func TestFallbackSkipsDisallowedModel(t *testing.T) {
	env := fallbackEnv(t, envOptions{})
	bigFailsWideServes(t, env, keyBeta)
}

// A background job falls back like a foreground call, and its log line names the model that
// served it.
func TestFallbackBackgroundJob(t *testing.T) {
	env := fallbackEnv(t, envOptions{store: tempBolt(t, store.BoltOptions{})})
	env.sim.SetModelScript("sim-big", platformsim.Reply{AfterEvents: 1, Silence: time.Hour})
	q := submit(t, env, keyAlpha1, `{"model":"big","input":"hello","background":true}`)
	r := pollUntil(t, env, keyAlpha1, q.Get("id").Str, "completed", "failed")
	if r.Get("status").Str != "completed" {
		t.Fatalf("job ended %s: %s", r.Get("status").Str, r.Raw)
	}
	if got := upstreamModels(env); len(got) != 2 || got[1] != "sim-small" {
		t.Errorf("platform calls %v, want sim-big then sim-small", got)
	}
	ok := waitFor(5*time.Second, func() bool { return strings.Contains(env.logs.String(), `"served_model":"small"`) })
	if !ok {
		t.Errorf("no log line names the served model: %s", env.logs.String())
	}
}

// A model that is not routed sends nothing new: no header, an empty served_model.
func TestNoFallbackConfiguredUnchanged(t *testing.T) {
	env := fallbackEnv(t, envOptions{})
	status, h, _ := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(`{"model":"wide","messages":[{"role":"user","content":"hi"}]}`))
	if status != 200 || h.Get(servedModelHeader) != "" {
		t.Fatalf("%d, served header %q", status, h.Get(servedModelHeader))
	}
	if requestLine(t, env).Get("served_model").Str != "" {
		t.Errorf("served_model set for an answer the model asked for served")
	}
}

// Spend and usage history go by the model that did the work, at its price: a refused
// attempt costs nothing and makes no row; a stalled one is charged its reservation at the
// stalled model's price (a call sent without an answer), and the fallback its own usage at
// its own price.
func TestFallbackSpendAtServedModelPrice(t *testing.T) {
	cases := []struct {
		name   string
		reply  platformsim.Reply
		body   string
		bigRow bool // the abandoned attempt on big is charged
	}{
		{"refused_attempt_free", platformsim.Reply{Status: 500, Body: errorJSON("server_error", "server_error", "boom")}, fallbackRoutes[0].body, false},
		{"stalled_attempt_charged", platformsim.Reply{AfterEvents: 1, Silence: time.Hour}, fallbackRoutes[1].body, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bolt := tempBolt(t, store.BoltOptions{})
			history := billing.NewRecorder(bolt, time.Hour, testclock.Running(), nil)
			ledger := memoryLedger(t)
			env := fallbackEnv(t, envOptions{ledger: ledger, history: history})
			env.sim.SetModelScript("sim-big", c.reply)
			status, h, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(c.body))
			if status != 200 || h.Get(servedModelHeader) != "small" {
				t.Fatalf("%d served by %q: %s", status, h.Get(servedModelHeader), b)
			}
			requestLine(t, env) // the request has settled and billed
			rows, err := history.Query(context.Background(), "00000101", "99991231", map[string]bool{"model": true})
			if err != nil {
				t.Fatal(err)
			}
			byModel := map[string]billing.Row{}
			for _, r := range rows {
				byModel[r.Model] = r
			}
			small, ok := byModel["small"]
			if !ok || small.InputTokens == 0 || small.CostMicros != billing.MicrosOf(float64(small.InputTokens)*1/1e6+float64(small.OutputTokens)*2/1e6) {
				t.Errorf("small's row %+v, want its usage at small's price", small)
			}
			big, charged := byModel["big"]
			if charged != c.bigRow {
				t.Fatalf("a row for big: %v, want %v (%+v)", charged, c.bigRow, rows)
			}
			if charged && (big.OutputTokens != env.cfg.Ratelimit.DefaultMaxOutputTokens || big.CostMicros != billing.MicrosOf(float64(big.InputTokens)*10/1e6+float64(big.OutputTokens)*30/1e6)) {
				t.Errorf("big's row %+v, want its reservation at big's price", big)
			}
			day, _ := ledger.Spent("team:alpha")
			if got, want := billing.MicrosOf(day), small.CostMicros+big.CostMicros; got != want {
				t.Errorf("team spent %d micros, want %d", got, want)
			}
		})
	}
}

// A stall with no fallback left is the client's 504 first_token_timeout, charged as a call
// sent without an answer; a stream that starts in time is not cut by the timer later on.
func TestStallWithoutFallback(t *testing.T) {
	env := fallbackEnv(t, envOptions{})
	env.sim.SetModelScript("sim-small", platformsim.Reply{AfterEvents: 1, Silence: time.Hour})
	body := `{"model":"small","input":"hello","stream":true}`
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body))
	if status != 504 || gjson.GetBytes(b, "error.code").Str != "first_token_timeout" {
		t.Fatalf("%d %s, want 504 first_token_timeout", status, b)
	}
	line := requestLine(t, env)
	if line.Get("usage_estimated").Str != "no_answer" || line.Get("output_tokens").Int() != env.cfg.Ratelimit.DefaultMaxOutputTokens {
		t.Errorf("stall charged %s, want its reservation (no_answer)", line.Raw)
	}
	// Output at once, then a pause longer than the timeout: the stream is whole.
	env.sim.SetModelScript("sim-small", platformsim.Reply{AfterEvents: 4, Silence: 1500 * time.Millisecond})
	status, _, b = env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body))
	if status != 200 || !bytes.Contains(b, []byte("response.completed")) {
		t.Fatalf("%d, want a whole stream: %s", status, tail(b))
	}
}

// A fallback the spend budget cannot cover at its price is skipped for the next one.
func TestFallbackSkipsUnaffordableModel(t *testing.T) {
	env := fallbackEnv(t, envOptions{ledger: memoryLedger(t), mutate: func(c *config.Config) {
		// small costs 100 per 1M output tokens: 4096 of them (the default cap) cost 0.41,
		// more than the day's 0.30 allows; big (0.12) and wide (0.06) fit.
		c.Models[1].Price.Output = 100
		c.Teams[0].Limits.SpendPerDay = 0.30
	}})
	bigFailsWideServes(t, env, keyAlpha1)
}

// The request's span names the model that served it; one attempt span per model tried.
func TestFallbackTraced(t *testing.T) {
	leakCheck(t)
	recv := tracingtest.NewReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL())
	tr, err := tracing.New(context.Background(), tracing.Options{Version: "test"})
	if err != nil || tr == nil {
		t.Fatalf("tracing.New = %v, %v", tr, err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	env := fallbackEnv(t, envOptions{tracer: tr})
	env.sim.SetModelScript("sim-big", platformsim.Reply{Status: 500, Body: errorJSON("server_error", "server_error", "boom")})
	if status, _, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(fallbackRoutes[2].body)); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	flush := func() { _ = tr.ForceFlush(context.Background()) }
	spans, ok := recv.WaitFor(5*time.Second, flush, func(s []tracingtest.Span) bool {
		return len(tracingtest.Find(s, tracingtest.Server, "")) >= 1
	})
	if !ok {
		t.Fatalf("no server span: %+v", spans)
	}
	srv := tracingtest.Find(spans, tracingtest.Server, "")[0]
	if srv.Attrs[tracing.AttrServedModel] != "small" {
		t.Errorf("server span %s = %v, want small", tracing.AttrServedModel, srv.Attrs[tracing.AttrServedModel])
	}
	if clients := tracingtest.Find(spans, tracingtest.Client, ""); len(clients) != 2 {
		t.Errorf("%d attempt spans, want one per model tried", len(clients))
	}
}

// openBreakers is an upstream.Health whose named breakers are open; it counts what it was
// asked.
type openBreakers struct {
	open  map[string]bool
	mu    sync.Mutex
	asked []string
}

func (h *openBreakers) Allow(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, name)
	return !h.open[name]
}

func (h *openBreakers) Report(string, bool) {}

// set opens the breakers of the named upstream models, and only those.
func (h *openBreakers) set(models ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open = map[string]bool{}
	for _, m := range models {
		h.open[upstream.ModelBreaker(m)] = true
	}
}

// A fallback whose breaker is open is skipped; only the fallbacks about to be tried are
// asked (a half-open breaker's one probe is not taken by a look).
func TestFallbackSkipsOpenBreaker(t *testing.T) {
	h := &openBreakers{open: map[string]bool{"model:sim-small": true}}
	env := fallbackEnv(t, envOptions{health: h})
	env.sim.SetModelScript("sim-big", platformsim.Reply{Status: 500, Body: errorJSON("server_error", "server_error", "boom")})
	status, hdr, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(fallbackRoutes[2].body))
	if status != 200 || hdr.Get(servedModelHeader) != "wide" {
		t.Fatalf("%d served by %q: %s", status, hdr.Get(servedModelHeader), b)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := strings.Join(h.asked, ","); got != "model:sim-small,model:sim-wide" {
		t.Errorf("breakers asked %s, want small's then wide's", got)
	}
}

// Chat's n choices fall back together: one failed choice moves all of them to the next
// model, so the answer never mixes models.
func TestFallbackChoicesTogether(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "nonstream", true: "stream"}[stream], func(t *testing.T) {
			env := fallbackEnv(t, envOptions{})
			// One choice fails, the other is answered (and abandoned when its sibling fails).
			env.sim.SetModelScript("sim-big", platformsim.Reply{Status: 503, Body: errorJSON("server_error", "server_is_overloaded", "busy")})
			body := fmt.Sprintf(`{"model":"big","n":2,"stream":%t,"messages":[{"role":"user","content":"hello"}]}`, stream)
			status, h, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(body))
			if status != 200 || h.Get(servedModelHeader) != "small" {
				t.Fatalf("%d served by %q: %s", status, h.Get(servedModelHeader), b)
			}
			var big, small int
			for _, m := range upstreamModels(env) {
				switch m {
				case "sim-big":
					big++
				case "sim-small":
					small++
				}
			}
			if big != 2 || small != 2 {
				t.Errorf("platform calls: %d to sim-big, %d to sim-small; want both choices on each", big, small)
			}
		})
	}
}

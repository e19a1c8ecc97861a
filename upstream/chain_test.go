package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/apitest"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/platform"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// modelPlatform answers each call by the model its body names: the next reply scripted for
// that model, else at once (a stream with one output event, or a whole answer). It records
// the models in the order the calls came.
type modelPlatform struct {
	mu     sync.Mutex
	script map[string][]string // model -> its next replies: "503", "400", "ctx" (context too long), "stall"
	seen   []string
}

func (m *modelPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	model := gjson.GetBytes(body, "model").Str
	m.mu.Lock()
	m.seen = append(m.seen, model)
	reply := ""
	if list := m.script[model]; len(list) > 0 {
		reply, m.script[model] = list[0], list[1:]
	}
	m.mu.Unlock()
	stream := r.Header.Get("Accept") == "text/event-stream"
	switch reply {
	case "503":
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"busy","type":"server_error","code":"server_is_overloaded"}}`)
	case "400":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_value"}}`)
	case "ctx":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`)
	case "stall": // the stream opens and says nothing more until the caller gives up
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		if !stream {
			_, _ = io.WriteString(w, `{"id":"resp_1","status":"completed"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n"+
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"+
			"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n")
	}
}

func (m *modelPlatform) models() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen)
}

// fakeHost keeps a chain's books as notes: what it held, gave back, settled and was told.
type fakeHost struct {
	refuse map[string]bool // Hold refuses these model ids (their spend budgets cannot cover them)
	notes  apitest.Notes
}

func (h *fakeHost) Hold(id string, choices, output int64) (Route, bool) {
	h.notes.Note(fmt.Sprintf("hold %s x%d out %d", id, choices, output))
	if h.refuse[id] {
		return Route{}, false
	}
	return Route{Upstream: "up-" + id, Input: 7}, true
}

func (h *fakeHost) Unhold() { h.notes.Note("unhold") }

func (h *fakeHost) Abandon(model string, f *Failure, charge accounting.Charge) {
	h.notes.Note(fmt.Sprintf("abandon %s %s", model, f.Kind))
}

func (h *fakeHost) FellBack(asked, served string, f *Failure) {
	h.notes.Note("fell " + asked + ">" + served)
}

// chainModels: big falls back to small, then to wide (the one with a larger context window).
var chainModels = []config.Model{
	{ID: "big", Upstream: "up-big", ContextWindow: 8000, Fallbacks: []string{"small", "wide"}},
	{ID: "small", Upstream: "up-small", ContextWindow: 4000},
	{ID: "wide", Upstream: "up-wide", ContextWindow: 128000},
}

// newChainGateway builds a Gateway of models over a modelPlatform, with breakers health (nil:
// none) and the default two retries, whose waits are not spent.
func newChainGateway(t *testing.T, models []config.Model, health Health, script map[string][]string) (*Gateway, *modelPlatform) {
	t.Helper()
	up := &modelPlatform{script: script}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	client, err := platform.New(srv.URL, srv.URL, srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Upstream: config.Upstream{RequestTimeout: 30 * time.Second}, Models: models,
		Teams: []config.Team{{Name: "alpha", Keys: []config.Key{{Name: "alpha-1"}}}}}
	g := New(Deps{Platform: client, Health: health}, cfg, false)
	p := g.Policy()
	p.Jitter = func() float64 { return 0 }
	p.Sleep = func(context.Context, time.Duration) error { return nil }
	return g.WithPolicy(p), up
}

// chainCall is one request's chain and what it reports to.
type chainCall struct {
	Chain
	record   reqlog.Record
	reqBody  []byte
	reserved ratelimit.Usage
	hdr      http.Header
}

func startChain(g *Gateway, host Host, health Health, p *auth.Principal, model string, stream bool, choices int64) *chainCall {
	c := &chainCall{record: reqlog.Record{Model: model}, reqBody: []byte(`{"model":"up-` + model + `","input":"hi"}`),
		reserved: ratelimit.Usage{InputTokens: 100, OutputTokens: 64}, hdr: http.Header{}}
	c.Start(g, &Start{Host: host, Health: health, Principal: p, Record: &c.record, Trail: Trail{Attempts: &c.record.Attempts},
		Body: &c.reqBody, Stream: stream, Reserve: &c.reserved, Choices: choices, Header: c.hdr})
	return c
}

// open opens c's call, closing its answer when the test ends.
func (c *chainCall) open(t *testing.T) *Failure {
	t.Helper()
	resp, cancel, f := c.Open(t.Context())
	if f == nil {
		t.Cleanup(func() { resp.Body.Close(); cancel() })
	}
	return f
}

func TestChainFallsBack(t *testing.T) {
	tests := []struct {
		name    string
		script  map[string][]string
		models  []string        // the caller's allow-list; nil: every model
		refuse  map[string]bool // spend budgets that refuse a fallback
		blocked string          // an open breaker
		served  string          // "": the model asked for served, or nobody
		status  int             // the failure's status; 0: an answer
		settled bool            // the failure was settled by the chain already
		seen    string          // the platform models called, in order
		notes   string          // the host's notes
	}{
		{name: "answered", seen: "up-big"},
		{name: "overloaded_moves_on", script: map[string][]string{"up-big": {"503"}}, served: "small",
			seen: "up-big up-small", notes: "abandon big status_5xx|hold small x1 out 64|fell big>small"},
		{name: "context_length_skips_smaller", script: map[string][]string{"up-big": {"ctx"}}, served: "wide",
			seen: "up-big up-wide", notes: "abandon big status_4xx|hold wide x1 out 64|fell big>wide"},
		{name: "client_error_stays", script: map[string][]string{"up-big": {"400"}}, status: 400, seen: "up-big"},
		{name: "not_allowed_skipped", script: map[string][]string{"up-big": {"503"}}, models: []string{"big", "wide"}, served: "wide",
			seen: "up-big up-wide", notes: "abandon big status_5xx|hold wide x1 out 64|fell big>wide"},
		{name: "budget_refuses_one", script: map[string][]string{"up-big": {"503"}}, refuse: map[string]bool{"small": true}, served: "wide",
			seen: "up-big up-wide", notes: "abandon big status_5xx|hold small x1 out 64|hold wide x1 out 64|fell big>wide"},
		{name: "open_breaker_gives_back_its_hold", script: map[string][]string{"up-big": {"503"}}, blocked: "model:up-small", served: "wide",
			seen: "up-big up-wide", notes: "abandon big status_5xx|hold small x1 out 64|unhold|hold wide x1 out 64|fell big>wide"},
		{name: "budgets_refuse_all", script: map[string][]string{"up-big": {"503"}}, refuse: map[string]bool{"small": true, "wide": true},
			status: 503, settled: true, seen: "up-big", notes: "abandon big status_5xx|hold small x1 out 64|hold wide x1 out 64"},
		// The last of the chain is retried by upstream.max_retries again (2), the others not.
		{name: "chain_exhausted", script: map[string][]string{"up-big": {"503"}, "up-small": {"503"}, "up-wide": {"503", "503", "503"}},
			served: "wide", status: 503, seen: "up-big up-small up-wide up-wide up-wide",
			notes: "abandon big status_5xx|hold small x1 out 64|fell big>small|abandon small status_5xx|hold wide x1 out 64|fell big>wide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			health := &fakeHealth{blocked: map[string]bool{tt.blocked: tt.blocked != ""}}
			g, up := newChainGateway(t, chainModels, nil, tt.script)
			host := &fakeHost{refuse: tt.refuse}
			p := &auth.Principal{Team: "alpha", Models: tt.models}
			c := startChain(g, host, health, p, "big", false, 1)
			f := c.open(t)
			switch {
			case tt.status == 0 && f != nil:
				t.Fatalf("failure %d %s, want an answer", f.Status, f.Body)
			case tt.status != 0 && (f == nil || f.Status != tt.status || f.Settled != tt.settled):
				t.Fatalf("failure %+v, want status %d, settled %v", f, tt.status, tt.settled)
			}
			if got := strings.Join(up.models(), " "); got != tt.seen {
				t.Errorf("platform called for %s, want %s", got, tt.seen)
			}
			if got := strings.Join(host.notes.Got(), "|"); got != tt.notes {
				t.Errorf("host notes %q, want %q", got, tt.notes)
			}
			if c.record.ServedModel != tt.served || c.hdr.Get(ServedModelHeader) != tt.served {
				t.Errorf("served %q (header %q), want %q", c.record.ServedModel, c.hdr.Get(ServedModelHeader), tt.served)
			}
			if want := len(up.models()); c.record.Attempts != want {
				t.Errorf("attempts %d, want every one sent (%d)", c.record.Attempts, want)
			}
			if tt.served != "" {
				if got := gjson.GetBytes(c.reqBody, "model").Str; got != "up-"+tt.served || c.Model() != tt.served {
					t.Errorf("body names %q, chain on %q; want up-%s", got, c.Model(), tt.served)
				}
				if c.reserved != (ratelimit.Usage{InputTokens: 7, OutputTokens: 64}) {
					t.Errorf("reservation %+v, want the fallback's estimate and the same output cap", c.reserve)
				}
			}
		})
	}
}

// The retries each attempt gets (issue 45): a model's own count; none while a fallback the
// caller may use is left; else upstream.max_retries.
func TestChainRetries(t *testing.T) {
	two := 2
	models := []config.Model{
		{ID: "big", Fallbacks: []string{"small", "wide"}},
		{ID: "own", Fallbacks: []string{"small"}, Retries: &two},
		{ID: "small"},
		{ID: "wide"},
	}
	g, _ := newChainGateway(t, models, nil, nil)
	for _, tc := range []struct {
		name      string
		asked     string
		allowed   []string
		fallbacks int // FallBack calls made before the attempt
		retries   int
		own       bool
	}{
		{name: "fallback_left", asked: "big", own: true},
		{name: "own_count", asked: "own", retries: 2, own: true},
		{name: "no_fallbacks", asked: "small"},
		{name: "unlisted", asked: "other"},
		{name: "fallbacks_not_allowed", asked: "big", allowed: []string{"big"}},
		{name: "one_allowed_left", asked: "big", allowed: []string{"big", "small"}, own: true},
		{name: "last_of_chain", asked: "big", fallbacks: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startChain(g, &fakeHost{}, nil, &auth.Principal{Team: "alpha", Models: tc.allowed}, tc.asked, false, 1)
			for range tc.fallbacks {
				if !c.FallBack(&Failure{Status: 503, Kind: "status_5xx"}, accounting.Charge{}) {
					t.Fatal("did not fall back")
				}
			}
			if n, own := c.retries(); n != tc.retries || own != tc.own {
				t.Errorf("retries %d (own %v), want %d (own %v)", n, own, tc.retries, tc.own)
			}
		})
	}
}

// BenchmarkChainSuccessPath is the chain's whole added work on a call whose first attempt
// succeeds, apart from the gateway's own: starting it and building the attempt's Call, with
// the look-ups Open and Attempt make (a model with fallbacks, one without). The route
// benchmarks (proxy's BenchmarkChatFallbacks) measure it inside a request, where the noise
// of a shared machine is larger than it.
func BenchmarkChainSuccessPath(b *testing.B) {
	g := New(Deps{}, &config.Config{Models: []config.Model{{ID: "bench", Fallbacks: []string{"spare"}}, {ID: "spare"}, {ID: "plain"}}}, false)
	p := &auth.Principal{Team: "alpha"}
	for _, id := range []string{"bench", "plain"} {
		b.Run(id, func(b *testing.B) {
			rec := reqlog.Record{Model: id}
			body := []byte(`{}`)
			var reserve ratelimit.Usage
			var c Chain
			var call Call
			host := &fakeHost{}
			b.ReportAllocs()
			for b.Loop() {
				c.Start(g, &Start{Host: host, Principal: p, Record: &rec, Body: &body, Reserve: &reserve})
				c.fill(&call, &c.trail)
				if m := g.plans[c.model]; m != nil && m.firstToken > 0 {
					b.Fatal("watched")
				}
			}
		})
	}
}

package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/journal"
	"modelgate/overhead"
	"modelgate/platform"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/store"
	"modelgate/tracing"
)

// The benchmarks below run the whole handler chain (routing, auth, admission, body checks,
// upstream call, relay, access log record) in process. The upstream is a RoundTripper that
// answers with bytes rendered once by the simulated platform, handing a stream over one event
// per Read as a network would; the client is a writer that keeps nothing. So the figures are
// modelgate's own work plus a handful of allocations of the harness (request, bodies).

// cannedUpstream answers every call with a prepared answer chosen by the request's stream flag.
type cannedUpstream struct {
	json, stream []byte
	jsonHdr      http.Header
	streamHdr    http.Header
}

func (u *cannedUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	var scratch [512]byte
	stream := false
	if req.Body != nil {
		for {
			n, err := req.Body.Read(scratch[:])
			if bytes.Contains(scratch[:n], []byte(`"stream":true`)) {
				stream = true
			}
			if err != nil {
				break
			}
		}
		req.Body.Close()
	}
	resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Request: req}
	if stream {
		resp.Header, resp.Body, resp.ContentLength = u.streamHdr, &eventByEvent{b: u.stream}, -1
	} else {
		resp.Header, resp.Body, resp.ContentLength = u.jsonHdr, io.NopCloser(bytes.NewReader(u.json)), int64(len(u.json))
	}
	return resp, nil
}

// eventByEvent hands out one SSE event per Read, the way a platform flushing each event
// arrives over a socket.
type eventByEvent struct{ b []byte }

func (e *eventByEvent) Read(p []byte) (int, error) {
	if len(e.b) == 0 {
		return 0, io.EOF
	}
	end := len(e.b)
	if i := bytes.Index(e.b, []byte("\n\n")); i >= 0 {
		end = i + 2
	}
	n := copy(p, e.b[:end])
	e.b = e.b[n:]
	return n, nil
}

func (e *eventByEvent) Close() error { return nil }

// render asks the simulated platform for its answer to body.
func render(b testing.TB, sim *platformsim.Sim, body string) ([]byte, http.Header) {
	b.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-platform")
	w := httptest.NewRecorder()
	sim.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("sim answered %d: %s", w.Code, w.Body.Bytes())
	}
	return w.Body.Bytes(), w.Header().Clone()
}

// discardWriter is a client that reads everything and keeps nothing.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *discardWriter) Flush()                      {}

// benchYAML lets its team call any model by its platform name (limits.unlisted_models:
// allow): the benchmarks measure the gateway's path, not a model list.
const benchYAML = `
listen: 127.0.0.1:0
upstream:
  gateway_url: http://upstream.invalid
  base_url: http://upstream.invalid
  api_key: sk-platform
limits:
  unlisted_models: allow
teams:
  - name: bench
    keys:
      - name: bench-1
        key: mg-bench-key-1
`

// newBenchServer builds a Server whose platform is up; the access log is discarded.
func newBenchServer(b testing.TB, up http.RoundTripper) http.Handler {
	b.Helper()
	return newTracedBenchServer(b, up, nil)
}

// newTracedBenchServer is newBenchServer with tracing by tracer (nil: off).
func newTracedBenchServer(b testing.TB, up http.RoundTripper, tracer *tracing.Tracer) http.Handler {
	b.Helper()
	d := benchDeps(b, up, "")
	d.Tracer = tracer
	return benchServer(b, d).Handler()
}

// benchDeps are the Deps of a bench Server: benchYAML with extraYAML appended, the platform
// behind up, a memory limiter, the access log discarded. Benchmarks add what they measure
// (a store, the ledger) before benchServer builds it.
func benchDeps(b testing.TB, up http.RoundTripper, extraYAML string) Deps {
	b.Helper()
	cfg, err := config.Parse([]byte(benchYAML+extraYAML), "bench.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	a, err := auth.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	client, err := platform.New(cfg.Upstream.GatewayURL, cfg.Upstream.BaseURL, up)
	if err != nil {
		b.Fatal(err)
	}
	lim, err := ratelimit.New(ratelimit.Options{Store: "memory", DataPath: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lim.Close() })
	return Deps{Config: cfg, Auth: a, Limiter: lim, Platform: client, Logger: slog.New(slog.DiscardHandler)}
}

func benchServer(b testing.TB, d Deps) *Server {
	b.Helper()
	s, err := New(d)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchRoute drives one route with one body until b.Loop ends.
func benchRoute(b *testing.B, h http.Handler, path, body string, wantMin int) {
	b.Helper()
	payload := []byte(body)
	b.SetBytes(int64(len(payload)))
	serveLoop(b, h, benchRequest(path), payload, wantMin)
}

// benchRequest is a POST to path with the bench key and a JSON body to come.
func benchRequest(path string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, nil)
	req.Header.Set("Authorization", "Bearer mg-bench-key-1")
	req.Header.Set("Content-Type", "application/json")
	return req
}

// serveLoop serves req with payload as its body until b.Loop ends, and fails on an answer
// that is not a 200 of at least wantMin bytes.
func serveLoop(b *testing.B, h http.Handler, req *http.Request, payload []byte, wantMin int) {
	b.Helper()
	w := &discardWriter{h: http.Header{}}
	rd := bytes.NewReader(payload)
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.status, w.n = 0, 0
		rd.Reset(payload)
		req.Body, req.ContentLength = io.NopCloser(rd), int64(len(payload))
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK || w.n < wantMin {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
}

// benchUpstream renders the minimal platform's answers, and sim-long's 200-delta stream for
// the stream_200 cases.
func benchUpstream(b testing.TB, model string) *cannedUpstream {
	b.Helper()
	sim := platformsim.New(platformsim.Options{Minimal: model == ""})
	if model == "" {
		model = "bench"
	}
	u := &cannedUpstream{}
	u.json, u.jsonHdr = render(b, sim, `{"model":"`+model+`","input":"Write one short sentence about benchmarks."}`)
	u.stream, u.streamHdr = render(b, sim, `{"model":"`+model+`","input":"Write one short sentence about benchmarks.","stream":true}`)
	return u
}

func BenchmarkPassthrough(b *testing.B) {
	minimal, long := benchUpstream(b, ""), benchUpstream(b, "sim-long")
	cases := []struct {
		name string
		up   *cannedUpstream
		body string
	}{
		{"nonstream", minimal, `{"model":"bench","input":"Write one short sentence about benchmarks."}`},
		{"stream", minimal, `{"model":"bench","input":"Write one short sentence about benchmarks.","stream":true}`},
		{"stream_200", long, `{"model":"sim-long","input":"Write one short sentence about benchmarks.","stream":true}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			benchRoute(b, newBenchServer(b, c.up), "/v1/responses", c.body, 100)
		})
	}
}

func BenchmarkChat(b *testing.B) {
	benchDialect(b, "/v1/chat/completions", `"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]`)
}

// BenchmarkMessages is BenchmarkChat for the Anthropic Messages route.
func BenchmarkMessages(b *testing.B) {
	benchDialect(b, "/v1/messages", `"max_tokens":256,"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]`)
}

// benchDialect runs a client dialect's route with the request fields msgs: non-stream and
// stream on the minimal platform, and stream_200 on sim-long's 200-delta stream.
func benchDialect(b *testing.B, path, msgs string) {
	minimal, long := benchUpstream(b, ""), benchUpstream(b, "sim-long")
	cases := []struct {
		name string
		up   *cannedUpstream
		body string
	}{
		{"nonstream", minimal, `{"model":"bench",` + msgs + `}`},
		{"stream", minimal, `{"model":"bench","stream":true,` + msgs + `}`},
		{"stream_200", long, `{"model":"sim-long","stream":true,` + msgs + `}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			benchRoute(b, newBenchServer(b, c.up), path, c.body, 100)
		})
	}
}

// x-modelgate-overhead-ms states modelgate's own time: a platform that takes 80ms before it
// answers must not show up in it, and with the setting off there is no header.
func TestOverheadHeader(t *testing.T) {
	const upstreamDelay = 80 * time.Millisecond
	cases := []struct {
		name, path, body string
		on               bool
	}{
		{"responses", "/v1/responses", `{"model":"sim-chat","input":"hi"}`, true},
		{"responses_stream", "/v1/responses", `{"model":"sim-chat","input":"hi","stream":true}`, true},
		{"chat", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`, true},
		{"chat_stream", "/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"chat_stop_from_stream", "/v1/chat/completions", `{"model":"sim-chat","stop":["zzz"],"messages":[{"role":"user","content":"hi"}]}`, true},
		{"off", "/v1/responses", `{"model":"sim-chat","input":"hi"}`, false},
		{"sidecar", balancePath, "", true}, // a GET to the platform's own API
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, "", func(c *config.Config) { c.Server.OverheadHeader = tc.on })
			method, simPath := http.MethodPost, "/v1/responses"
			if tc.body == "" {
				method, simPath = http.MethodGet, tc.path
			}
			env.sim.Enqueue(simPath, platformsim.Reply{Delay: upstreamDelay})
			start := time.Now()
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			status, hdr, body := env.do(t, method, tc.path, keyAlpha1, body)
			took := time.Since(start)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			v := hdr.Get(overhead.Header)
			if !tc.on {
				if v != "" {
					t.Fatalf("header present with the setting off: %q", v)
				}
				return
			}
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil || ms < 0 {
				t.Fatalf("header %q is not a non-negative number of milliseconds", v)
			}
			own := time.Duration(ms * float64(time.Millisecond))
			if took < upstreamDelay || own > upstreamDelay/2 {
				t.Errorf("overhead %v for a call that took %v with an upstream delay of %v", own, took, upstreamDelay)
			}
		})
	}
}

// BenchmarkChatHistory compares the chat route with usage history and spend accounting off
// and on (a bbolt store flushed every second by its own goroutine, as main runs it). The
// request path only adds to an in-memory batch, so the two should be within noise.
//
//	go test ./proxy -run '^$' -bench ChatHistory -count 8
func BenchmarkChatHistory(b *testing.B) {
	up := benchUpstream(b, "")
	const body = `{"model":"bench","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			benchRoute(b, newHistoryBenchServer(b, up, on).Handler(), "/v1/chat/completions", body, 100)
		})
	}
}

func newHistoryBenchServer(b *testing.B, up *cannedUpstream, on bool) *Server {
	b.Helper()
	d := benchDeps(b, up, "models:\n  - id: bench\n    price: {input: 0.15, output: 0.6}\n")
	if on {
		st, err := store.OpenBolt(b.TempDir(), store.BoltOptions{})
		if err != nil {
			b.Fatal(err)
		}
		d.Store = st
		if d.Ledger, err = billing.NewLedger(context.Background(), st, nil, nil); err != nil {
			b.Fatal(err)
		}
		d.History = billing.NewRecorder(st, time.Hour, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { d.Ledger.Run(ctx, time.Second) })
		wg.Go(func() { d.History.Run(ctx, time.Second) })
		b.Cleanup(func() { cancel(); wg.Wait(); st.Close() })
	}
	return benchServer(b, d)
}

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

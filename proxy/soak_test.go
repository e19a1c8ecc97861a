package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/redisconn/redistest"
	"modelgate/testclock"
)

var soakFull = flag.Bool("soak", false, "run the full one-minute soak (also MODELGATE_SOAK=1)")

// soakYAML: four teams, each with its own platform key so the platform's totals are per
// team, three of them with limits the load reaches.
const soakYAML = apitest.SimUpstreamYAML + `models:
  - id: sim-chat
  - id: sim-long
  - id: sim-slow
teams:
  - name: t1
    upstream_api_key: sk-soak-team-1
    limits: {concurrent_requests: 3}
    keys: [{name: k1, key: mg-soak-key-1}]
  - name: t2
    upstream_api_key: sk-soak-team-2
    limits: {tokens_per_minute: 150000}
    keys: [{name: k2, key: mg-soak-key-2}]
  - name: t3
    upstream_api_key: sk-soak-team-3
    limits: {requests_per_minute: 2400}
    keys: [{name: k3, key: mg-soak-key-3, limits: {concurrent_requests: 2}}]
  - name: t4
    upstream_api_key: sk-soak-team-4
    keys: [{name: k4, key: mg-soak-key-4}]
`

// soakSettings are the soak's knobs, from the environment, so the same test runs short
// and often in CI and long, wide or on Redis when hunting:
//
//	MODELGATE_SOAK=1               60 s instead of 10 s
//	MODELGATE_SOAK_DURATION=20s    any other length
//	MODELGATE_SOAK_WORKERS=24      concurrent clients (default 12)
//	MODELGATE_SOAK_FAULTS=20       percent of calls with an injected platform fault (default 5)
//	MODELGATE_SOAK_STORE=redis     the limiter on a private redis-server
type soakSettings struct {
	dur          time.Duration
	workers      int
	faultPercent int
	redis        bool
}

func soakSettingsFromEnv(t *testing.T) soakSettings {
	s := soakSettings{dur: 10 * time.Second, workers: 12, faultPercent: 5}
	if *soakFull || os.Getenv("MODELGATE_SOAK") == "1" {
		s.dur = 60 * time.Second
	}
	if v := os.Getenv("MODELGATE_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("MODELGATE_SOAK_DURATION: %q", v)
		}
		s.dur = d
	}
	for name, dst := range map[string]*int{"MODELGATE_SOAK_WORKERS": &s.workers, "MODELGATE_SOAK_FAULTS": &s.faultPercent} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				t.Fatalf("%s: %q", name, v)
			}
			*dst = n
		}
	}
	switch v := os.Getenv("MODELGATE_SOAK_STORE"); v {
	case "", "memory":
	case "redis":
		s.redis = true
	default:
		t.Fatalf("MODELGATE_SOAK_STORE: %q", v)
	}
	return s
}

// soakUpstream gives every worker its own simulated platform, chosen by the mark the worker
// writes into its prompt (soakMark), which the platform receives whatever the route (the
// request id it sends is modelgate's own, never the worker's). A fault a worker scripts is
// then met by that worker's own next call, never by another's, so each fault lands on the
// kind of call it was meant for.
type soakUpstream struct{ sims []*platformsim.Sim }

func (u *soakUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	n := -1
	if _, rest, ok := bytes.Cut(body, []byte(soakMarkPrefix)); ok {
		if end := bytes.IndexByte(rest, ':'); end > 0 {
			n, _ = strconv.Atoi(string(rest[:end]))
		}
	}
	if n < 0 || n >= len(u.sims) {
		http.Error(w, "soak: request without a worker's mark", http.StatusTeapot)
		return
	}
	u.sims[n].ServeHTTP(w, r)
}

// soakMarkPrefix starts the mark of a worker's prompts: soak-w<worker>:.
const soakMarkPrefix = "soak-w"

// soakMark puts the mark of the worker whose request ids start w<worker>- before the first
// "hello" or "cut" of a body's prompt.
func soakMark(body, id string) string {
	mark := soakMarkPrefix + strings.TrimPrefix(strings.SplitN(id, "-", 2)[0], "w") + ": "
	for _, word := range []string{`"hello`, `"cut`} {
		if strings.Contains(body, word) {
			return strings.Replace(body, word, `"`+mark+word[1:], 1)
		}
	}
	return body
}

// billed is what the platforms charged per request id.
func (u *soakUpstream) billed() map[string]platformsim.Totals {
	out := map[string]platformsim.Totals{}
	for _, s := range u.sims {
		maps.Copy(out, s.Billed())
	}
	return out
}

func (u *soakUpstream) totals(key string) platformsim.Totals {
	var t platformsim.Totals
	for _, s := range u.sims {
		x := s.Totals(key)
		t.Requests += x.Requests
		t.InputTokens += x.InputTokens
		t.OutputTokens += x.OutputTokens
	}
	return t
}

// soakStats are the run's figures.
type soakStats struct {
	requests, ok, refused, upstreamErrors, streamErrors, faults, cancels, anomalies atomic.Int64
}

// TestSoak runs mixed traffic with client cancellations (before the headers and mid-stream),
// 5 % injected platform faults (header timeouts, broken bodies and streams among them),
// partial fan-out failures, stop sequences and teams at their limits, then checks that
// nothing panicked, nothing leaked and modelgate's accounting holds against the platform's
// bill, request by request: equal where the platform's usage is known, never below it where
// it is not. 10 s by default; see soakSettings for the knobs.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	cfg := soakSettingsFromEnv(t)
	dur := cfg.dur
	up := &soakUpstream{sims: make([]*platformsim.Sim, cfg.workers)}
	for i := range up.sims {
		up.sims[i] = platformsim.New(platformsim.Options{}) // any bearer key: totals are per key
	}
	store := ""
	if cfg.redis {
		store = "redis://" + redistest.Start(t).Addr + "/0"
	}
	// The limiter's UTC day must not roll over during the run (the totals are the day's):
	// its clock starts early enough before midnight for the longest run.
	offset := testclock.SameDay(testclock.Origin(), time.Hour).Sub(time.Now())
	env := newResEnv(t, envOptions{
		yaml:         soakYAML,
		upstream:     up,
		limiterNow:   func() time.Time { return time.Now().Add(offset) },
		limiterStore: store,
		mutate: func(c *config.Config) {
			// Long enough that a healthy call on a loaded machine never meets them: a timeout
			// on a call that was not stalled on purpose cuts bytes the platform already
			// charged, and the totals could no longer be compared.
			c.Upstream.ResponseHeaderTimeout = 1500 * time.Millisecond
			c.Upstream.StreamIdleTimeout = time.Second
			c.Upstream.RequestTimeout = 3 * time.Second
		},
	})
	for _, s := range up.sims {
		t.Cleanup(s.Close)
	}
	// The retry waits are real here.
	st := *env.server.state()
	st.gateway = withSleep(st.gateway, nil)
	env.server.st.Store(&st)

	keys := []string{"mg-soak-key-1", "mg-soak-key-2", "mg-soak-key-3", "mg-soak-key-4"}
	var stats soakStats
	before := memFigures()
	var mid memStats
	var midOnce sync.Once
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for n := 0; time.Now().Before(deadline); n++ {
				sw := &soakWorker{env: env, sim: up.sims[w], rng: rng, stats: &stats, id: fmt.Sprintf("w%d-%d", w, n), faultPercent: cfg.faultPercent}
				sw.one(t, keys[rng.IntN(len(keys))])
				if w == 0 && time.Since(start) > dur/2 {
					midOnce.Do(func() { mid = memFigures() })
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	drainCut := soakDrainCut(t, env)

	// Accounting: both sides book a moment after the client was answered or left, so read
	// until they agree or the wait runs out.
	var acct soakAccounting
	accountingOK := waitFor(5*time.Second, func() bool {
		acct = reconcile(t, env, up)
		return len(acct.problems) == 0
	})
	for _, line := range acct.report {
		t.Log(line)
	}
	t.Logf("settled at an estimate (reason: requests): %v; %d streams cut by the final drain", acct.estimated, drainCut)
	if !accountingOK {
		for i, p := range acct.problems {
			if i == 20 {
				t.Logf("... and %d more", len(acct.problems)-20)
				break
			}
			t.Log(p)
		}
		t.Error("modelgate's accounting does not hold against the platform's bill")
	}

	// Leaks: once the load stopped and idle connections are closed, goroutines return to
	// where they were and the heap does not keep what the load used.
	env.client.Transport.(*http.Transport).CloseIdleConnections()
	env.server.platform.CloseIdleConnections()
	for _, s := range up.sims {
		s.Reset() // the simulator's own request records are not modelgate's memory
	}
	var after memStats
	settled := waitFor(5*time.Second, func() bool {
		after = memFigures()
		return after.goroutines <= before.goroutines+2
	})
	t.Logf("soak %v, %d workers, %d %% faults, store %s: %d requests (%.0f/s), %d ok, %d refused by limits (429), %d upstream errors passed on, %d streams ended by an error frame, %d faults injected, %d client cancels, %d anomalies",
		elapsed.Round(time.Millisecond), cfg.workers, cfg.faultPercent, map[bool]string{false: "memory", true: "redis"}[cfg.redis], stats.requests.Load(), float64(stats.requests.Load())/elapsed.Seconds(), stats.ok.Load(), stats.refused.Load(),
		stats.upstreamErrors.Load(), stats.streamErrors.Load(), stats.faults.Load(), stats.cancels.Load(), stats.anomalies.Load())
	t.Logf("goroutines: before %d, mid-run %d, after %d; heap: before %.1f MiB, mid-run %.1f MiB, after %.1f MiB (%.1f MiB of it the test's log); RSS: before %.1f MiB, mid-run %.1f MiB, after %.1f MiB",
		before.goroutines, mid.goroutines, after.goroutines, mib(before.heap), mib(mid.heap), mib(after.heap), mib(env.logs.Held()), mib(before.rss), mib(mid.rss), mib(after.rss))
	t.Logf("upstream failures by kind (from the access log): %v", upstreamErrorKinds(env.logs.String()))
	if !settled {
		t.Errorf("goroutines grew: %d before, %d after the load", before.goroutines, after.goroutines)
	}
	// The access log this test keeps in memory grows with every request (about 12 MiB in a
	// minute); it is the test's, not modelgate's.
	if kept := after.heap - min(env.logs.Held(), after.heap); kept > before.heap+16<<20 {
		t.Errorf("heap grew from %.1f to %.1f MiB, %.1f MiB of it the test's log", mib(before.heap), mib(after.heap), mib(after.heap-kept))
	}
	if stats.anomalies.Load() > 0 {
		t.Errorf("%d answers were not well formed", stats.anomalies.Load())
	}
	if stats.faults.Load() == 0 || stats.cancels.Load() == 0 || stats.refused.Load() == 0 || stats.ok.Load() == 0 {
		t.Errorf("the mix did not exercise every case")
	}
}

type memStats struct {
	goroutines int
	heap, rss  uint64
}

func memFigures() memStats {
	// Two collections: the first moves what sync.Pools hold (answer buffers of up to 256 KB
	// among them) into their victim caches, where it still counts as heap; the second frees
	// it. What is left after both is what the load really kept.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memStats{goroutines: runtime.NumGoroutine(), heap: m.HeapAlloc, rss: rssBytes()}
}

// rssBytes reads the resident set size on Linux; 0 elsewhere.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// soakWorker makes one call of the mix.
type soakWorker struct {
	env          *resEnv
	sim          *platformsim.Sim
	rng          *rand.Rand
	stats        *soakStats
	id           string
	faultPercent int
}

// Stream faults: the platform charges what it flushed; modelgate counts what it read and
// settles the reservation, the upper bound for a stream the platform cut.
var soakStreamFaults = []func(rng *rand.Rand) []platformsim.Reply{
	func(rng *rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultResetMidStream, AfterEvents: 1 + rng.IntN(10)}}
	},
	func(*rand.Rand) []platformsim.Reply { return []platformsim.Reply{{Fault: platformsim.FaultTruncate}} },
	func(rng *rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultGarbage, AfterEvents: 1 + rng.IntN(10)}}
	},
	func(rng *rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultInvalidJSON, AfterEvents: 1 + rng.IntN(10)}}
	},
	func(rng *rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultStallMidStream, AfterEvents: 1 + rng.IntN(10)}}
	},
}

// Faults on non-stream answers: a broken body the platform billed in full, which modelgate
// cannot read and settles at the reservation.
var soakBodyFaults = []func(rng *rand.Rand) []platformsim.Reply{
	func(*rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultInvalidJSON}}
	},
	func(*rand.Rand) []platformsim.Reply { return []platformsim.Reply{{Fault: platformsim.FaultGarbage}} },
	func(*rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultResetMidStream}}
	},
	func(*rand.Rand) []platformsim.Reply { return []platformsim.Reply{{Fault: platformsim.FaultTruncate}} },
}

var soakAnyFaults = []func(rng *rand.Rand) []platformsim.Reply{
	func(*rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultStallBeforeHeaders}}
	},
	// A header timeout on a call the platform billed.
	func(*rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Fault: platformsim.FaultStallAfterBilling}}
	},
	func(*rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{status(503, map[string]string{"Retry-After-Ms": "20"}), status(502, nil)}
	},
	func(*rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{status(503, map[string]string{"Retry-After-Ms": "1"}), status(503, map[string]string{"Retry-After-Ms": "1"}), status(503, map[string]string{"Retry-After-Ms": "1"})}
	},
	func(rng *rand.Rand) []platformsim.Reply {
		return []platformsim.Reply{{Delay: time.Duration(rng.IntN(200)) * time.Millisecond}}
	},
}

func (sw *soakWorker) one(t *testing.T, key string) {
	rng := sw.rng
	route := routes[rng.IntN(len(routes))]
	model := "sim-chat"
	if rng.IntN(4) == 0 {
		model = "sim-long"
	}
	body := strings.Replace(route.body, `"sim-chat"`, `"`+model+`"`, 1)
	if rng.IntN(3) == 0 {
		body = strings.Replace(body, `"hello"`, fmt.Sprintf(`"hello %d %s"`, rng.IntN(1000), strings.Repeat("word ", rng.IntN(40))), 1)
	}
	if strings.Contains(body, `"zzz"`) && rng.IntN(2) == 0 {
		body = strings.Replace(body, `"zzz"`, `"You"`, 1) // a stop sequence that strikes: modelgate's own cut
	}
	var replies []platformsim.Reply
	cancelKind := 0 // 1: before headers, 2: mid-stream, 3: once the platform billed, before headers
	switch r := rng.IntN(100); {
	case r < sw.faultPercent:
		sw.stats.faults.Add(1)
		switch {
		case route.stream && rng.IntN(3) > 0:
			replies = soakStreamFaults[rng.IntN(len(soakStreamFaults))](rng)
		case !route.stream && route.name != "chat_stop" && rng.IntN(3) == 0:
			replies = soakBodyFaults[rng.IntN(len(soakBodyFaults))](rng)
		default:
			replies = soakAnyFaults[rng.IntN(len(soakAnyFaults))](rng)
		}
	case r < sw.faultPercent+3:
		if rng.IntN(2) == 0 {
			cancelKind = 1
			replies = []platformsim.Reply{{Delay: 5 * time.Second}}
		} else {
			cancelKind = 3
			replies = []platformsim.Reply{{Fault: platformsim.FaultStallAfterBilling}}
		}
	case r < sw.faultPercent+6 && route.stream:
		cancelKind = 2
		replies = []platformsim.Reply{{Fault: platformsim.FaultStallMidStream, AfterEvents: 8}}
	case r < sw.faultPercent+15 && strings.HasPrefix(route.name, "chat"):
		// Two choices are two upstream calls; a third of them with one choice failing.
		body = strings.Replace(body, `"messages"`, `"n":2,"messages"`, 1)
		if rng.IntN(3) == 0 {
			fail := status(500, nil)
			fail.Body = errorJSON("server_error", "server_error", "one choice failed")
			replies = []platformsim.Reply{fail, {}}
			if rng.IntN(2) == 0 {
				replies = []platformsim.Reply{{}, fail}
			}
		}
	}
	body = soakMark(body, sw.id)
	seen, billedBefore := len(sw.sim.Requests()), len(sw.sim.Billed())
	for _, rep := range replies {
		sw.sim.Enqueue("/v1/responses", rep)
	}
	sw.stats.requests.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sw.env.front.URL+route.path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", sw.id)
	switch cancelKind {
	case 1:
		go func() {
			// Leave once the platform holds the call (or soon, if it was refused locally).
			waitFor(time.Second, func() bool { return len(sw.sim.Requests()) > seen })
			time.Sleep(10 * time.Millisecond)
			cancel()
		}()
	case 3:
		go func() {
			// Leave once the platform billed the call (or soon, if it was refused locally).
			waitFor(time.Second, func() bool { return len(sw.sim.Billed()) > billedBefore })
			cancel()
		}()
	}
	resp, err := sw.env.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			sw.anomaly(t, "transport error: %v", err)
		} else {
			sw.stats.cancels.Add(1)
		}
		sw.drain(seen, len(replies))
		return
	}
	raw, err := sw.read(resp, route, cancelKind == 2, cancel)
	resp.Body.Close()
	switch {
	case cancelKind == 2 && resp.StatusCode == 200 && route.stream:
		sw.stats.cancels.Add(1)
	case err != nil && ctx.Err() != nil:
		sw.stats.cancels.Add(1)
	case err != nil:
		sw.anomaly(t, "reading the answer: %v", err)
	default:
		sw.check(t, resp, route, raw)
	}
	sw.drain(seen, len(replies))
}

// read reads the answer; for a mid-stream cancel it leaves after the events the platform
// sends before it stalls (8 events: 4 text deltas), so both sides counted the same.
func (sw *soakWorker) read(resp *http.Response, rt route, cancelMid bool, cancel context.CancelFunc) ([]byte, error) {
	if !cancelMid || resp.StatusCode != 200 {
		return io.ReadAll(resp.Body)
	}
	br := bufio.NewReader(resp.Body)
	events, deltas := 0, 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		switch {
		case rt.path == "/v1/responses" && line == "\n":
			events++
		case rt.path != "/v1/responses" && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`):
			deltas++
		}
		if events == 8 || deltas == 4 {
			cancel()
			return nil, nil
		}
	}
}

// drain takes back scripted replies no call consumed (the call was refused by a limit, or
// the client left first), so they cannot meet this worker's next, different call. A
// scripted reply is consumed by exactly one recorded request.
func (sw *soakWorker) drain(seen, scripted int) {
	left := scripted - (len(sw.sim.Requests()) - seen)
	for range left {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://soak.invalid/v1/responses", strings.NewReader(`{"model":"sim-chat","input":"x"}`))
		req.Header.Set("Authorization", "Bearer sk-soak-drain")
		func() {
			defer func() { _ = recover() }() // a reset fault aborts the handler: nothing to reset here
			sw.sim.ServeHTTP(&soakSink{h: http.Header{}}, req)
		}()
		cancel()
	}
}

type soakSink struct{ h http.Header }

func (d *soakSink) Header() http.Header         { return d.h }
func (d *soakSink) Write(p []byte) (int, error) { return len(p), nil }
func (d *soakSink) WriteHeader(int)             {}
func (d *soakSink) Flush()                      {}

// check classifies a finished answer; anything not well formed is an anomaly.
func (sw *soakWorker) check(t *testing.T, resp *http.Response, rt route, raw []byte) {
	isStream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	switch {
	case resp.StatusCode == 429:
		sw.stats.refused.Add(1)
		sw.wellFormedError(t, raw)
	case resp.StatusCode != 200:
		sw.stats.upstreamErrors.Add(1)
		sw.wellFormedError(t, raw)
	case !isStream:
		if rt.stream || !json.Valid(raw) {
			sw.anomaly(t, "non-stream answer: %q", tail(raw))
			return
		}
		sw.stats.ok.Add(1)
	default:
		evs := sseLines(raw)
		if len(evs) == 0 {
			sw.anomaly(t, "empty stream")
			return
		}
		last := evs[len(evs)-1]
		for _, d := range evs[:len(evs)-1] {
			if !json.Valid([]byte(d)) {
				sw.anomaly(t, "stream chunk is not JSON: %q", d)
			}
		}
		switch {
		case last == "[DONE]" || strings.Contains(last, `"type":"response.completed"`) || strings.Contains(last, `"type":"response.incomplete"`):
			sw.stats.ok.Add(1)
		case strings.Contains(last, `"error"`) && json.Valid([]byte(last)):
			sw.stats.streamErrors.Add(1)
		default:
			sw.anomaly(t, "stream ends without [DONE], completion or error: %q", tail(raw))
		}
	}
}

func (sw *soakWorker) wellFormedError(t *testing.T, raw []byte) {
	var e errorBody
	if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
		sw.anomaly(t, "error answer not in OpenAI shape: %q", tail(raw))
	}
}

func (sw *soakWorker) anomaly(t *testing.T, format string, args ...any) {
	if sw.stats.anomalies.Add(1) <= 5 {
		t.Logf("%s: "+format, append([]any{sw.id}, args...)...)
	}
}

// sseLines returns the data of each event of a stream, comments skipped.
func sseLines(raw []byte) []string {
	var out []string
	for line := range bytes.SplitSeq(raw, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			out = append(out, string(d))
		}
	}
	return out
}

// upstreamErrorKinds counts the access log's upstream_error values.
func upstreamErrorKinds(logs string) map[string]int {
	out := map[string]int{}
	for line := range strings.SplitSeq(logs, "\n") {
		var rec struct {
			Msg         string `json:"msg"`
			UpstreamErr string `json:"upstream_error"`
			Status      int    `json:"status"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && rec.UpstreamErr != "" {
			out[rec.UpstreamErr]++
		}
	}
	return out
}

// soakDrainCut ends the run the way a SIGTERM whose drain runs out of time does: streams are
// open, the server stops taking requests, its drain time passes and the remaining connections
// are closed. The cut streams' handlers must still settle before the books are read. It
// returns how many streams were cut.
func soakDrainCut(t *testing.T, env *resEnv) int {
	bodies := []struct{ path, body string }{
		{"/v1/responses", `{"model":"sim-slow","input":"cut by the drain","stream":true}`},
		{"/v1/chat/completions", `{"model":"sim-slow","stream":true,"messages":[{"role":"user","content":"cut by the drain"}]}`},
	}
	var resps []*http.Response
	for i := range 4 {
		b := bodies[i%len(bodies)]
		req, _ := http.NewRequest(http.MethodPost, env.front.URL+b.path, strings.NewReader(soakMark(b.body, "w0-drain")))
		req.Header.Set("Authorization", "Bearer mg-soak-key-4") // t4: no limits to refuse it
		req.Header.Set("X-Request-Id", fmt.Sprintf("w0-drain-%d", i))
		resp, err := env.client.Do(req)
		if err != nil {
			t.Errorf("drain phase: %v", err)
			continue
		}
		defer resp.Body.Close()
		// Read until the first output so the stream is well under way.
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil || strings.Contains(line, "delta") {
				break
			}
		}
		resps = append(resps, resp)
	}
	env.server.StartDrain()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if env.front.Config.Shutdown(ctx) == nil {
		t.Errorf("drain phase: the streams ended before the drain cut them")
	}
	env.front.CloseClientConnections()
	wait, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if !env.server.WaitSettled(wait) {
		t.Errorf("drain phase: handlers still running 5s after their connections were closed")
	}
	return len(resps)
}

// soakAccounting is the reconciliation of modelgate's figures with the platform's bill.
type soakAccounting struct {
	report    []string       // per team: both sides' totals
	estimated map[string]int // requests settled at an estimate, by reason
	problems  []string       // every way the rule was broken
}

// reconcile checks the accounting rule request by request and team by team:
//   - a request whose usage the platform reported is settled at exactly the platform's bill;
//   - a request settled at an estimate is never below the platform's bill;
//   - every request the platform billed was settled by modelgate;
//   - each team's limiter totals are the sum of its requests' settlements, hence never
//     below the platform's bill, and equal to it on the requests with known usage.
func reconcile(t *testing.T, env *resEnv, up *soakUpstream) soakAccounting {
	type rec struct {
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
		Team      string `json:"team"`
		Input     int64  `json:"input_tokens"`
		Output    int64  `json:"output_tokens"`
		Estimated string `json:"usage_estimated"`
		Status    int    `json:"status"`
		Upstream  string `json:"upstream_error"`
	}
	settled := map[string]rec{}
	for line := range strings.SplitSeq(env.logs.String(), "\n") {
		var r rec
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "request" && r.RequestID != "" {
			settled[r.RequestID] = r
		}
	}
	var a soakAccounting
	a.estimated = map[string]int{}
	type sums struct{ in, out, billedIn, billedOut int64 }
	byTeam := map[string]*sums{}
	team := func(name string) *sums {
		if byTeam[name] == nil {
			byTeam[name] = &sums{}
		}
		return byTeam[name]
	}
	billed := up.billed()
	for id, b := range billed {
		r, ok := settled[id]
		if !ok {
			a.problems = append(a.problems, fmt.Sprintf("%s: the platform billed in=%d out=%d, modelgate settled nothing", id, b.InputTokens, b.OutputTokens))
			continue
		}
		switch {
		case r.Estimated == "" && (r.Input != b.InputTokens || r.Output != b.OutputTokens):
			a.problems = append(a.problems, fmt.Sprintf("%s: usage known, modelgate settled in=%d out=%d, the platform billed in=%d out=%d (status %d, upstream error %q)",
				id, r.Input, r.Output, b.InputTokens, b.OutputTokens, r.Status, r.Upstream))
		case r.Estimated != "" && (r.Input < b.InputTokens || r.Output < b.OutputTokens):
			a.problems = append(a.problems, fmt.Sprintf("%s: usage estimated (%s), modelgate settled in=%d out=%d, below the platform's in=%d out=%d",
				id, r.Estimated, r.Input, r.Output, b.InputTokens, b.OutputTokens))
		}
	}
	for id, r := range settled {
		if r.Estimated != "" {
			a.estimated[r.Estimated]++
		}
		if r.Team == "" {
			continue
		}
		s := team(r.Team)
		s.in += r.Input
		s.out += r.Output
		if _, ok := billed[id]; !ok && r.Estimated == "" && (r.Input != 0 || r.Output != 0) {
			a.problems = append(a.problems, fmt.Sprintf("%s: modelgate settled in=%d out=%d as known, the platform billed nothing", id, r.Input, r.Output))
		}
	}
	for i, k := range []string{"sk-soak-team-1", "sk-soak-team-2", "sk-soak-team-3", "sk-soak-team-4"} {
		name := fmt.Sprintf("t%d", i+1)
		s := team(name)
		p := up.totals(k)
		u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: "team:" + name}})
		if err != nil {
			t.Fatal(err)
		}
		a.report = append(a.report, fmt.Sprintf("%s: modelgate in=%d out=%d, platform in=%d out=%d (platform requests %d, modelgate requests %d)",
			name, u[0].DayInputTokens, u[0].DayOutputTokens, p.InputTokens, p.OutputTokens, p.Requests, u[0].DayRequests))
		if u[0].DayInputTokens != s.in || u[0].DayOutputTokens != s.out {
			a.problems = append(a.problems, fmt.Sprintf("%s: the limiter holds in=%d out=%d, the requests settled in=%d out=%d",
				name, u[0].DayInputTokens, u[0].DayOutputTokens, s.in, s.out))
		}
		if u[0].DayInputTokens < p.InputTokens || u[0].DayOutputTokens < p.OutputTokens {
			a.problems = append(a.problems, fmt.Sprintf("%s: modelgate in=%d out=%d is below the platform's in=%d out=%d",
				name, u[0].DayInputTokens, u[0].DayOutputTokens, p.InputTokens, p.OutputTokens))
		}
	}
	sort.Strings(a.problems)
	return a
}

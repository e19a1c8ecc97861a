// Command mgbench measures what modelgate adds to a request, against the smallest Go proxy for
// the same job (bench/cmd/floor) and against calling the upstream (bench/cmd/benchup)
// directly, on the same machine in the same run. Load comes from wrk; every comparison runs in
// interleaved rounds and the report gives medians over rounds. See bench/README.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"modelgate/translate"
)

type options struct {
	binDir      string
	workDir     string
	rounds      int
	duration    time.Duration
	latDuration time.Duration
	conns       int
	threads     int
	streams     int
	uploadBytes int64
	tickStreams int
	memoryRuns  int
	phases      map[string]bool
	routes      []string // only comparisons whose name contains one of these; nil: all
}

const (
	platformKey = "sk-bench-platform"
	benchKey    = "mg-bench-key-0123456789"
)

const mgConfig = `listen: ${LISTEN}
upstream:
  gateway_url: UPSTREAM
  base_url: UPSTREAM
  api_key: ` + platformKey + `
ratelimit:
  store: memory
  data_path: ${DATA}
teams:
  - name: bench
    keys:
      - name: bench-1
        key: ` + benchKey + `
server:
  overhead_header: OVERHEAD
limits:
  websocket_connections: 4096 # the websocket phase holds 1,000 idle connections of one key
`

func main() {
	var o options
	var phases string
	flag.StringVar(&o.binDir, "bin", "", "directory holding the modelgate, benchup and floor binaries")
	flag.StringVar(&o.workDir, "work", "", "directory for configs and logs (default: a new temporary one)")
	flag.IntVar(&o.rounds, "rounds", 5, "interleaved rounds per comparison")
	flag.DurationVar(&o.duration, "duration", 4*time.Second, "wrk run length for throughput")
	flag.DurationVar(&o.latDuration, "latency-duration", 3*time.Second, "wrk run length at one connection")
	flag.IntVar(&o.conns, "conns", 32, "wrk connections for throughput")
	flag.IntVar(&o.threads, "threads", 1, "wrk threads for throughput")
	flag.IntVar(&o.streams, "streams", 1000, "concurrent open streams for the RSS check")
	flag.Int64Var(&o.uploadBytes, "upload-bytes", 100_000_000, "asset upload size for the RSS check")
	flag.IntVar(&o.memoryRuns, "memory-runs", 1, "runs of the memory checks, in alternating order; the report gives medians")
	flag.IntVar(&o.tickStreams, "tick-streams", 4, "concurrent timestamped streams per delay measurement")
	flag.StringVar(&phases, "phases", "throughput,latency,events,memory,tracing", "comma-separated phases to run (also: store, responses.store local against off; websocket, the Responses WebSocket mode against HTTP; attribution, recording tags and end users against none)")
	var routes string
	flag.StringVar(&routes, "routes", "", "comma-separated route filter for throughput, latency and events, e.g. messages (default: all)")
	flag.Parse()
	for r := range strings.SplitSeq(routes, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.routes = append(o.routes, r)
		}
	}
	o.phases = map[string]bool{}
	for p := range strings.SplitSeq(phases, ",") {
		o.phases[strings.TrimSpace(p)] = true
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "mgbench:", err)
		os.Exit(1)
	}
}

// bench holds the running processes and what was measured.
type bench struct {
	o        options
	up, flr  *proc
	mg       *proc
	children []*proc
	rep      report
}

func run(o options) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk not found: apt-get install -y wrk")
	}
	if o.workDir == "" {
		d, err := os.MkdirTemp("", "mgbench-")
		if err != nil {
			return err
		}
		o.workDir = d
	}
	b := &bench{o: o}
	defer b.stopAll()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		b.stopAll()
		os.Exit(130)
	}()

	var err error
	if b.up, err = b.startReporting("upstream", "benchup", "--slow-delay", "2s"); err != nil {
		return err
	}
	if b.flr, err = b.startReporting("floor", "floor", "--upstream", b.up.url, "--key", platformKey); err != nil {
		return err
	}
	if b.mg, err = b.startModelgate("modelgate", false); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "upstream %s, floor %s, modelgate %s; logs in %s\n", b.up.url, b.flr.url, b.mg.url, o.workDir)
	b.rep.opts = o
	b.rep.started = time.Now()

	steps := []struct {
		name string
		fn   func() error
	}{
		{"throughput", b.throughput},
		{"latency", b.latency},
		{"events", b.events},
		{"memory", b.memory},
		{"tracing", b.tracing},
		{"store", b.storeCost},
		{"websocket", b.websocketPhase},
		{"attribution", b.attributionCost},
	}
	for _, s := range steps {
		if !o.phases[s.name] {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	b.rep.print(os.Stdout)
	return nil
}

func (b *bench) startReporting(name, bin string, args ...string) (*proc, error) {
	p, err := startReporting(name, b.o.workDir, filepath.Join(b.o.binDir, bin), args...)
	if err == nil {
		b.children = append(b.children, p)
	}
	return p, err
}

func (b *bench) startModelgate(name string, overheadHeader bool, env ...string) (*proc, error) {
	return b.startModelgateWith(name, overheadHeader, "", env...)
}

// startModelgateWith starts a modelgate whose config ends with extra YAML.
func (b *bench) startModelgateWith(name string, overheadHeader bool, extra string, env ...string) (*proc, error) {
	cfg := strings.ReplaceAll(mgConfig, "UPSTREAM", b.up.url)
	cfg = strings.ReplaceAll(cfg, "OVERHEAD", fmt.Sprint(overheadHeader)) + extra
	p, err := startModelgate(name, b.o.workDir, filepath.Join(b.o.binDir, "modelgate"), cfg, env...)
	if err == nil {
		b.children = append(b.children, p)
	}
	return p, err
}

func (b *bench) stopAll() {
	for _, p := range b.children {
		p.stop()
	}
	b.children = nil
}

// Request bodies. The chat request's floor equivalent is exactly what modelgate sends
// upstream for it, produced by modelgate's own translator.
var (
	respBody       = []byte(`{"model":"bench-fast","input":"Write one short sentence about benchmarks."}`)
	respStreamBody = []byte(`{"model":"bench-fast","input":"Write one short sentence about benchmarks.","stream":true}`)
	chatBody       = []byte(`{"model":"bench-fast","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`)
	chatStreamBody = []byte(`{"model":"bench-fast","stream":true,"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`)
	ticksBody      = []byte(`{"model":"bench-ticks","input":"tick","stream":true}`)
	ticksChatBody  = []byte(`{"model":"bench-ticks","stream":true,"messages":[{"role":"user","content":"tick"}]}`)
	slowBody       = []byte(`{"model":"bench-slow","input":"hold this stream open","stream":true}`)
	slowChatBody   = []byte(`{"model":"bench-slow","stream":true,"messages":[{"role":"user","content":"hold this stream open"}]}`)
	msgsBody       = []byte(`{"model":"bench-fast","max_tokens":256,"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`)
	msgsStreamBody = []byte(`{"model":"bench-fast","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`)
	slowMsgsBody   = []byte(`{"model":"bench-slow","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hold this stream open"}]}`)
	ticksMsgsBody  = []byte(`{"model":"bench-ticks","max_tokens":4096,"stream":true,"messages":[{"role":"user","content":"tick"}]}`)
)

// routeCase is a route and the body a phase sends it, named as the report names it.
type routeCase struct {
	name, path string
	body       []byte
}

// bodyRoutes are the plain and streamed requests of each route, Responses and chat first:
// phases that leave Messages out take the first four.
func bodyRoutes() []routeCase {
	return []routeCase{
		{"/v1/responses", "/v1/responses", respBody},
		{"/v1/responses stream", "/v1/responses", respStreamBody},
		{"/v1/chat/completions", "/v1/chat/completions", chatBody},
		{"/v1/chat/completions stream", "/v1/chat/completions", chatStreamBody},
		{"/v1/messages", "/v1/messages", msgsBody},
		{"/v1/messages stream", "/v1/messages", msgsStreamBody},
	}
}

// inTurn runs first and second, the other way round on odd turns, so that neither side of
// a comparison always runs on a machine the other has just warmed.
func inTurn(turn int, first, second func() error) error {
	if turn%2 == 1 {
		first, second = second, first
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}

// upstreamEquivalentMessages is the Responses body modelgate sends for a Messages body.
func upstreamEquivalentMessages(body []byte) []byte {
	req, err := translate.ParseMessages(body)
	if err != nil {
		panic(err)
	}
	return req.ToResponses(req.Model, translate.RequestOptions{})
}

// wanted reports whether a comparison named name is selected by --routes.
func (o *options) wanted(name string) bool {
	if len(o.routes) == 0 {
		return true
	}
	for _, r := range o.routes {
		if strings.Contains(name, r) {
			return true
		}
	}
	return false
}

// upstreamEquivalent is the Responses body modelgate sends for a chat body.
func upstreamEquivalent(chat []byte) []byte {
	req, err := translate.ParseChat(chat)
	if err != nil {
		panic(err)
	}
	out, err := req.ToResponses(req.Model, translate.RequestOptions{})
	if err != nil {
		panic(err)
	}
	return out
}

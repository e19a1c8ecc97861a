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
	"sync"
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
	streams     []int // --streams: the memory phase's stream counts
	modes       []string
	slowReaders int
	normal      int
	slowRounds  int
	soakStreams int
	soakFor     time.Duration
	soakStore   string // responses.store of the soak's modelgate: off or local
	uploadBytes int64
	tickStreams int
	memoryRuns  int
	phases      map[string]bool
	pairControl bool     // --pair-control: paired phases compare "off" with itself, and the baseline comparison the baseline with itself
	routes      []string // only comparisons whose name contains one of these; nil: all
	baseline    string   // --baseline: the git revision run.sh built modelgate-baseline from; "" compares no builds

	// the commits run.sh says the two builds came from, for the report ("" if it did not say)
	candidateCommit, baselineCommit string
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
UPSTREAM_MODEratelimit:
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
models: # entries for the models the phases call, rather than unlisted_models: allow, so that a
  # --baseline build from before that key reads the same config
  - id: bench-fast
  - id: bench-slow
  - id: bench-ticks
  - id: bench-flood
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
	var streams, upstream string
	flag.StringVar(&streams, "streams", "1000", "concurrent open streams for the memory phase's RSS checks; a comma list runs each count, e.g. 1000,5000,10000")
	flag.StringVar(&upstream, "upstream", "h1", "how the proxies reach the upstream: h1, h2 (TLS with ALPN), h2c (HTTP/2 with prior knowledge), or a comma list run one after another and reported side by side")
	flag.IntVar(&o.normal, "normal-streams", 1000, "slowreaders: bench-ticks streams measured in each round")
	flag.IntVar(&o.slowReaders, "slow-readers", 100, "slowreaders: clients beside them that read nothing of a flooding stream")
	flag.IntVar(&o.slowRounds, "slow-rounds", 3, "slowreaders: interleaved rounds of with and without")
	flag.IntVar(&o.soakStreams, "soak-streams", 5000, "soak: streams kept open, each client replaced when it leaves")
	flag.DurationVar(&o.soakFor, "soak-duration", 10*time.Minute, "soak: how long it runs")
	flag.StringVar(&o.soakStore, "soak-store", "off", "soak: responses.store of its modelgate, off (what the streams alone leave behind) or local (also the kept responses, bounded by responses.store_max_per_team)")
	flag.Int64Var(&o.uploadBytes, "upload-bytes", 100_000_000, "asset upload size for the RSS check")
	flag.IntVar(&o.memoryRuns, "memory-runs", 1, "runs of the memory checks, in alternating order; the report gives medians")
	flag.IntVar(&o.tickStreams, "tick-streams", 4, "concurrent timestamped streams per delay measurement")
	flag.StringVar(&phases, "phases", "throughput,latency,events,memory,tracing", "comma-separated phases to run (also: store, responses.store local against off; websocket, the Responses WebSocket mode against HTTP; attribution, recording tags and end users against none; slowreaders, normal streams beside clients that do not read; soak, streams held for --soak-duration with clients coming and going)")
	flag.BoolVar(&o.pairControl, "pair-control", false, "store, attribution: run both sides as the \"off\" side (same config, same requests); with --baseline: run the baseline build on both sides; so the ratios show what the method reads when nothing differs")
	flag.StringVar(&o.baseline, "baseline", "", "throughput: also run modelgate built from this git revision (run.sh builds it, e.g. main or HEAD~3) and compare the work tree's build with it, on fresh processes every round")
	var routes string
	flag.StringVar(&routes, "routes", "", "comma-separated route filter for throughput, latency and events, e.g. messages (default: all)")
	flag.Parse()
	for r := range strings.SplitSeq(routes, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.routes = append(o.routes, r)
		}
	}
	var err error
	if o.modes, err = parseModes(upstream); err != nil {
		fmt.Fprintln(os.Stderr, "mgbench:", err)
		os.Exit(2)
	}
	if o.streams, err = parseCounts(streams); err != nil {
		fmt.Fprintln(os.Stderr, "mgbench: --streams:", err)
		os.Exit(2)
	}
	o.phases = map[string]bool{}
	for p := range strings.SplitSeq(phases, ",") {
		o.phases[strings.TrimSpace(p)] = true
	}
	if err := checkBaseline(o.baseline, o.phases, o.binDir); err != nil {
		fmt.Fprintln(os.Stderr, "mgbench:", err)
		os.Exit(2)
	}
	o.candidateCommit, o.baselineCommit = buildLabel(o.binDir, "modelgate"), buildLabel(o.binDir, baselineBinary)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "mgbench:", err)
		os.Exit(1)
	}
}

// bench holds one --upstream mode's running processes and what was measured in it.
type bench struct {
	o        options // workDir is the mode's own directory
	mode     *upstreamMode
	up, flr  *proc
	mg       *proc
	children []*proc
	rep      report
}

func run(o options) (err error) {
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk not found: apt-get install -y wrk")
	}
	nofile, ferr := raiseFileLimit()
	if ferr != nil {
		return fmt.Errorf("raise the descriptor limit: %w", ferr)
	}
	if o.workDir == "" {
		d, mkErr := os.MkdirTemp("", "mgbench-")
		if mkErr != nil {
			return mkErr
		}
		o.workDir = d
		// The logs are for a run that failed: a paired phase's access logs alone come to
		// about 1 GB, and runs left behind have filled this box's disk.
		defer func() {
			if err == nil {
				os.RemoveAll(d)
			} else {
				fmt.Fprintf(os.Stderr, "mgbench: logs kept in %s\n", d)
			}
		}()
	}
	var current *bench // the mode now running, stopped on a signal
	var mu sync.Mutex
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		mu.Lock()
		current.stopAll()
		os.Exit(130)
	}()
	started := time.Now()
	var reps []*report
	for _, name := range o.modes {
		mo := o
		if mo.workDir, err = modeDir(o.workDir, name); err != nil {
			return err
		}
		mode, err := newUpstreamMode(name, mo.workDir)
		if err != nil {
			return err
		}
		b := &bench{o: mo, mode: mode}
		b.rep.mode, b.rep.nofile = name, nofile
		mu.Lock()
		current = b
		mu.Unlock()
		err = b.runMode()
		b.stopAll()
		if err != nil {
			return fmt.Errorf("--upstream %s: %w", name, err)
		}
		reps = append(reps, &b.rep)
	}
	printReports(os.Stdout, o, started, reps)
	return nil
}

// runMode starts the upstream, the floor and modelgate in b's mode and runs the phases.
func (b *bench) runMode() error {
	var err error
	if b.up, err = b.startUpstream("upstream", 2*time.Second); err != nil {
		return err
	}
	if b.flr, err = b.startFloor("floor"); err != nil {
		return err
	}
	if b.mg, err = b.startModelgate("modelgate", false); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "[%s] upstream %s, floor %s, modelgate %s; logs in %s\n", b.mode.name, b.up.url, b.flr.url, b.mg.url, b.o.workDir)
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
		{"slowreaders", b.slowReadersPhase},
		{"soak", b.soak},
	}
	for _, s := range steps {
		if !b.o.phases[s.name] {
			continue
		}
		fmt.Fprintf(os.Stderr, "== [%s] %s\n", b.mode.name, s.name)
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// startUpstream starts a benchup serving b's mode, its bench-slow streams paced at slow;
// extra are more of its flags.
func (b *bench) startUpstream(name string, slow time.Duration, extra ...string) (*proc, error) {
	args := append([]string{"--slow-delay", slow.String()}, b.mode.benchupArgs()...)
	return b.startReporting(name, "benchup", append(args, extra...)...)
}

// startFloor starts a floor proxy to b's upstream in b's mode.
func (b *bench) startFloor(name string) (*proc, error) {
	return b.startReporting(name, "floor", b.mode.floorArgs(b.up.url)...)
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
	return b.startModelgateTo(b.up, name, overheadHeader, extra, env...)
}

// startModelgateTo starts a modelgate in front of the upstream up, reached in b's mode.
func (b *bench) startModelgateTo(up *proc, name string, overheadHeader bool, extra string, env ...string) (*proc, error) {
	p, err := startModelgate(name, b.o.workDir, filepath.Join(b.o.binDir, "modelgate"), b.modelgateConfig(up, overheadHeader, extra), env...)
	if err == nil {
		b.children = append(b.children, p)
	}
	return p, err
}

// modelgateConfig is the config of a modelgate in front of up, ending with extra YAML.
func (b *bench) modelgateConfig(up *proc, overheadHeader bool, extra string) string {
	cfg := strings.ReplaceAll(mgConfig, "UPSTREAM_MODE", b.mode.modelgateYAML())
	cfg = strings.ReplaceAll(cfg, "UPSTREAM", up.url)
	return strings.ReplaceAll(cfg, "OVERHEAD", fmt.Sprint(overheadHeader)) + extra
}

func (b *bench) stopAll() {
	if b == nil {
		return
	}
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
	// A Gemini body names its model and whether it streams in the URL path.
	gemBody      = []byte(`{"contents":[{"role":"user","parts":[{"text":"Write one short sentence about benchmarks."}]}],"generationConfig":{"maxOutputTokens":256}}`)
	ticksGemBody = []byte(`{"contents":[{"role":"user","parts":[{"text":"tick"}]}],"generationConfig":{"maxOutputTokens":4096}}`)
)

// The Gemini routes' paths for the bench's models.
const (
	gemPath       = "/v1beta/models/bench-fast:generateContent"
	gemStreamPath = "/v1beta/models/bench-fast:streamGenerateContent?alt=sse"
	gemTicksPath  = "/v1beta/models/bench-ticks:streamGenerateContent?alt=sse"
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
		{"/v1beta generateContent", gemPath, gemBody},
		{"/v1beta streamGenerateContent", gemStreamPath, gemBody},
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

// upstreamEquivalentGemini is the Responses body modelgate sends for a Gemini body.
func upstreamEquivalentGemini(body []byte, stream bool) []byte {
	req, err := translate.ParseGemini(body, "bench-fast", stream, translate.ParseOptions{})
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

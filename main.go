// Command modelgate is an OpenAI-compatible gateway adapter for the GPU cloud platform: it
// serves /v1/chat/completions and /v1/responses on top of the platform's Responses gateway,
// holds the platform keys, enforces per-key and per-team limits, and proxies the platform's
// model-run, asset and balance routes for an application beside it.
package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/spf13/pflag"

	"modelgate/audit"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/journal"
	"modelgate/metrics"
	"modelgate/periodic"
	"modelgate/platform"
	"modelgate/platformsim"
	"modelgate/proxy"
	"modelgate/ratelimit"
	"modelgate/redisconn"
	"modelgate/reqlog"
	"modelgate/store"
	"modelgate/tracing"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type options struct {
	configPath string
	listen     string
	gatewayURL string
	baseURL    string
	simulate   bool
	simulateUp string // --simulate-upstream: how the embedded platform serves
	logLevel   string
	logFormat  string
	version    bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// gin's mode is process-wide and only decides whether it prints its routes and
	// warnings: the binary sets it here, before any engine exists (proxy.New leaves it).
	gin.SetMode(gin.ReleaseMode)
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return check(args[1:], stdout, stderr)
		case "healthcheck":
			return healthcheck(args[1:], stdout, stderr)
		case "keys":
			return keysCommand(args[1:], stdout, stderr)
		case "teams":
			return teamsCommand(args[1:], stdout, stderr)
		case "help":
			return help(args[1:], stdout, stderr)
		}
	}
	opts, code, done := parseFlags(args, stdout, stderr)
	if done {
		return code
	}
	if opts.version {
		fmt.Fprintln(stdout, "modelgate", version)
		return 0
	}
	logger, err := newLogger(opts.logLevel, opts.logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "modelgate:", err)
		return 2
	}
	redisconn.RouteLogs(logger) // process-wide in go-redis: once, here
	if err := serve(opts, logger); err != nil {
		logger.Error("modelgate stopped", "error", err.Error())
		return 1
	}
	return 0
}

func parseFlags(args []string, stdout, stderr io.Writer) (options, int, bool) {
	var o options
	fs := serveFlags(&o, stderr)
	fs.Usage = func() { fmt.Fprint(stdout, mainUsage(fs)) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, 0, true
		}
		fmt.Fprintln(stderr, "modelgate:", err, "(see modelgate --help)")
		return o, 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "modelgate: unexpected argument %q (the commands are check, keys, healthcheck and help)\n", fs.Arg(0))
		return o, 2, true
	}
	switch o.simulateUp {
	case platformsim.ServeH1, platformsim.ServeH2, platformsim.ServeH2C:
	default:
		fmt.Fprintf(stderr, "modelgate: --simulate-upstream %q: want h1, h2 or h2c\n", o.simulateUp)
		return o, 2, true
	}
	if fs.Changed("simulate-upstream") && !o.simulate {
		fmt.Fprintln(stderr, "modelgate: --simulate-upstream needs --simulate")
		return o, 2, true
	}
	return o, 0, false
}

// serveFlags are the flags of modelgate itself (serving), bound to o.
func serveFlags(o *options, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("modelgate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "YAML config file (default config.yaml in the working directory when it exists)")
	fs.StringVar(&o.listen, "listen", "", "listen address, overrides the config (default 127.0.0.1:8080)")
	fs.StringVar(&o.gatewayURL, "gateway-url", "", "the platform's {gateway_url}, where /v1/responses lives")
	fs.StringVar(&o.baseURL, "base-url", "", "the platform's {base_url}, where /api/open/v2/... lives")
	fs.BoolVar(&o.simulate, "simulate", false, "start an embedded simulated platform on loopback and use it as the upstream")
	fs.StringVar(&o.simulateUp, "simulate-upstream", platformsim.ServeH1, "how the --simulate platform serves: h1 (plain HTTP/1.1), h2 (TLS with HTTP/2, a certificate made at start) or h2c (cleartext HTTP/2)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	return fs
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(reqlog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// loadConfig finds and loads the config the flags name, then applies the flag overrides.
// Under --simulate an unset ${VAR} becomes the placeholder "sim-VAR", so the example config
// runs on a machine with no secrets; the names (never values) are logged.
func loadConfig(o options, logger *slog.Logger) (*config.Config, error) {
	path := o.configPath
	if path == "" {
		if _, err := os.Stat("config.yaml"); err == nil {
			path = "config.yaml"
		}
	}
	var cfg *config.Config
	switch {
	case path == "":
		cfg = config.Default()
	case o.simulate:
		var err error
		cfg, err = loadSimulated(path, func(name string) {
			logger.Warn("simulate: environment variable unset, using placeholder "+config.SimulatePlaceholder(name), "variable", name)
		})
		if err != nil {
			return nil, err
		}
	default:
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	}
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if o.gatewayURL != "" {
		cfg.Upstream.GatewayURL = o.gatewayURL
	}
	if o.baseURL != "" {
		cfg.Upstream.BaseURL = o.baseURL
	}
	if o.listen != "" || o.gatewayURL != "" || o.baseURL != "" {
		// Flags bypass the loader's checks; run them again on the result.
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// runTag is eight random hex digits naming one run of the simulated platform.
func runTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func serve(o options, logger *slog.Logger) error {
	cfg, err := loadConfig(o, logger)
	if err != nil {
		return err
	}
	for _, w := range cfg.KeyWarnings() {
		logger.Warn("weak local key: " + w) // names the key's place in the config, never its value
	}
	var sim *simulated // --simulate: the embedded platform, kept across reloads
	if o.simulate {
		if sim, err = startSimulated(o.simulateUp, logger); err != nil {
			return err
		}
		defer sim.stop()
		sim.point(cfg)
		logger.Info("simulated platform running", "url", sim.url)
	}
	var simRoots *x509.CertPool
	if sim != nil {
		simRoots = sim.roots
	}
	if cfg.Upstream.GatewayURL == "" || cfg.Upstream.BaseURL == "" {
		return errors.New("no upstream: set upstream.gateway_url and upstream.base_url (or --gateway-url/--base-url), or run with --simulate")
	}
	authn, err := auth.New(cfg)
	if err != nil {
		return err
	}
	topts := platform.TransportOptions{
		DialTimeout:           cfg.Upstream.DialTimeout,
		ResponseHeaderTimeout: cfg.Upstream.ResponseHeaderTimeout,
		HTTP2:                 cfg.Upstream.HTTP2,
	}
	if f := cfg.Upstream.TLS.CAFile; f != "" && simRoots == nil {
		if topts.RootCAs, err = config.ReadCAFile(f); err != nil {
			return fmt.Errorf("upstream.tls.ca_file: %w", err)
		}
	}
	if simRoots != nil {
		topts.RootCAs = simRoots
	}
	transport := platform.NewTransport(topts)
	client, err := platform.New(cfg.Upstream.GatewayURL, cfg.Upstream.BaseURL, transport, platform.WithVersion(version))
	if err != nil {
		return err
	}
	// The limiter's counters and the record store are on the same Redis (when on Redis at
	// all): one breaker for both, so either finding it hung spares the other the wait.
	storeGuard := redisconn.NewGuard(nil, logger)
	limiter, err := ratelimit.New(ratelimit.Options{
		Store: cfg.Ratelimit.Store, OnStoreError: cfg.Ratelimit.OnStoreError, Redis: cfg.Ratelimit.Redis,
		DataPath: cfg.Ratelimit.DataPath, Logger: logger, Guard: storeGuard,
	})
	if err != nil {
		return err
	}
	defer limiter.Close()
	tracer, err := startTracing(cfg, logger)
	if err != nil {
		return err
	}
	// On a drain the spans are flushed within its timeout; this is for the other ways out,
	// bounded so that an unreachable collector cannot hold the process.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tracer.Shutdown(ctx)
	}()
	records, err := store.Open(cfg.Ratelimit, nil, storeGuard)
	if err != nil {
		return err
	}
	// Deferred after the limiter's Close, so it runs before it: handlers are done by then.
	defer records.Close()
	replica, err := journal.ReplicaID(cfg.Ratelimit.DataPath)
	if err != nil {
		return err
	}
	admissions, err := journal.Open(cfg.Ratelimit.DataPath, replica, logger)
	if err != nil {
		return err
	}
	defer admissions.Close() // after the server's Close and the last flushes: the last clears are written
	obs := metrics.New(cfg)
	self, err := newSelfService(cfg, records, limiter, logger)
	if err != nil {
		return err
	}
	srv, err := proxy.New(proxy.Deps{Config: cfg, Auth: authn, Limiter: limiter, Platform: client, Logger: logger,
		Hooks: obs.Hooks(), MetricsHandler: obs.Handler(), Store: records, Tracer: tracer,
		Admin: self.deps.Admin, Issued: self.deps.Issued, Ledger: self.deps.Ledger, History: self.deps.History,
		Calibration: self.deps.Calibration, Breakers: self.breakers, Alerts: self.deps.Alerts, Journal: admissions, StoreWrites: self.writes})
	if err != nil {
		return err
	}
	settleCrashed(srv, replica, logger)
	self.start(srv)
	defer self.stop() // before the store closes: the last spend and history are flushed
	defer srv.Close() // before the store closes: responses still being written get there
	obs.WatchPlatformKeys(srv.KeyStates)
	obs.WatchEstimates(self.calib)
	obs.WatchBreakers(self.breakers)
	obs.WatchInflightBodies(srv.InflightBodyBytes)
	obs.WatchStoreWrites(func(yield func(string, uint64)) {
		self.writes.Failures(func(w store.Writer, n uint64) { yield(string(w), n) })
	})
	if self.deps.History != nil {
		obs.WatchHistoryDrops(self.deps.History.DroppedRows)
	}
	obs.WatchAlertDeliveries(func() (int64, int64, int64) {
		st := self.alerts.sender.Stats()
		return st.Delivered, st.Failed, st.Dropped
	})

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	httpServer := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// No WriteTimeout: it would cut long streams. Streams are bounded by the idle timer.
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	ctx, stopProbe := context.WithCancel(context.Background())
	defer stopProbe()
	// The first probe finishes before serving, so /readyz never claims a platform it has not seen.
	srv.SetReady(platformReachable(ctx, client))
	go probeReadiness(ctx, srv, client, cfg.Upstream.HealthInterval)

	// Signals are caught before the first request can be served: a SIGHUP sent as soon as
	// /healthz answers must reload, not kill the process (SIGHUP's default action).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// Start-up leaves garbage the heap's pages still hold: a ca_file's pool parses every
	// system root (about 4 MB of temporaries for 0.5 MB kept), and the config and routes
	// add more. The runtime gives idle pages back only when the heap is well past its goal,
	// so without this they stay resident for the life of the process.
	debug.FreeOSMemory()
	errc := make(chan error, 1)
	go func() { errc <- httpServer.Serve(ln) }()
	logger.Info("modelgate listening", "addr", ln.Addr().String(), "version", version, "mode", authn.Mode().String())
	for {
		select {
		case err := <-errc:
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				reload(o, sim, logger, srv, obs, authn.Mode(), self)
				continue
			}
			return drain(httpServer, srv, limiter, cfg.Server.DrainTimeout, logger, tracer)
		}
	}
}

// reload re-reads the config; a config that fails to load or validate is logged and ignored,
// so a bad edit never takes a running gateway down. Nor may a reload change the auth mode: a
// truncated file without team keys would turn a keys-mode gateway into passthrough and forward
// local keys upstream. Nor may it add a config key named like a key issued to the same team.
//
// Either way the audit log records it: the paths the reload changed, or that one was refused.
func reload(o options, sim *simulated, logger *slog.Logger, srv *proxy.Server, obs *metrics.Metrics, mode auth.Mode, self *selfService) {
	cfg, err := loadConfig(o, logger)
	if err == nil {
		// Under --simulate the new config is pointed at the platform already running.
		sim.point(cfg)
	}
	var a *auth.Authenticator
	if err == nil {
		a, err = auth.New(cfg)
	}
	if err == nil && a.Mode() != mode {
		err = fmt.Errorf("the new config is in %s mode but %s mode is running; switching modes needs a restart", a.Mode(), mode)
	}
	if err == nil {
		err = srv.CheckReload(cfg)
	}
	if err != nil {
		obs.ReloadRejected()
		// The error is not recorded: a parse error can quote the file, secrets and all.
		auditReload(logger, self.audit, audit.Entry{Action: audit.ConfigReloadRejected, Target: o.configPath})
		logger.Error("config reload rejected; the previous config keeps serving", "error", err.Error())
		return
	}
	old, _ := srv.State()
	srv.Reload(cfg, a)
	obs.Reload(cfg)
	self.reloaded(cfg)
	// Recorded before the log line, so a reload that is logged is in the audit log too.
	auditReload(logger, self.audit, audit.Entry{Action: audit.ConfigReloaded, Target: o.configPath, Changed: audit.ConfigChanges(old, cfg)})
	logger.Info("config reloaded", "mode", a.Mode().String())
}

// auditReload records a reload in the audit log: its actor is the signal, its target the
// config file (config.yaml when no --config named one).
func auditReload(logger *slog.Logger, log *audit.Log, e audit.Entry) {
	e.Actor = "signal:SIGHUP"
	if e.Target == "" {
		e.Target = "config.yaml"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := log.Record(ctx, e); err != nil {
		logger.Error("audit: entry not recorded", "action", e.Action, "err", err.Error())
	}
}

// startTracing starts OpenTelemetry tracing when the OTEL_* environment asks for it, and
// returns nil (tracing off) when it does not.
func startTracing(cfg *config.Config, logger *slog.Logger) (*tracing.Tracer, error) {
	tracer, err := tracing.New(context.Background(), tracing.Options{
		Version:        version,
		CaptureContent: cfg.Tracing.CaptureContent, ContentMaxBytes: cfg.Tracing.ContentMaxBytes,
		Logger: logger,
	})
	if err != nil || tracer == nil {
		return nil, err
	}
	logger.Info("tracing on", "capture_content", tracer.ContentMax() > 0)
	return tracer, nil
}

// probeReadiness dials the platform now and then; /readyz reports the result. A TCP connect
// is enough to tell "reachable" and costs the platform nothing.
func probeReadiness(ctx context.Context, srv *proxy.Server, client *platform.Client, every time.Duration) {
	if every <= 0 {
		every = 15 * time.Second
	}
	periodic.Every(ctx, every, func(ctx context.Context) {
		srv.SetReady(platformReachable(ctx, client))
	})
}

func platformReachable(ctx context.Context, client *platform.Client) bool {
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", client.GatewayAddr())
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"modelgate/admin"
	"modelgate/audit"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/breaker"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/proxy"
	"modelgate/ratelimit"
	"modelgate/redisconn"
	"modelgate/store"
)

// selfService is team self-service as main wires it: issued keys, spend budgets, usage
// history and the admin API over them, and the per-model calibration of token estimates,
// with the background loops that keep them in step with the store.
type selfService struct {
	deps  proxy.Deps // only the self-service fields are set
	api   *admin.API
	calib *calibration.Table
	// audit is the log of admin actions: the admin API's, and main's config reloads.
	audit *audit.Log
	// breakers are the circuit breakers per upstream model and platform key, shared by the
	// replicas through the record store.
	breakers *breaker.Set
	// alerts announce budget thresholds and key events over webhooks; checkEvery is how
	// often (alerts.check_interval, read at start).
	alerts     *alerting
	checkEvery time.Duration
	// writes hears of the record store's failed background writes (spend, usage history,
	// stored responses): modelgate_store_write_failures_total and /readyz's degraded.
	writes *store.WriteHealth
	srv    *proxy.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newSelfService(cfg *config.Config, records store.Store, limiter *ratelimit.Limiter, logger *slog.Logger) (*selfService, error) {
	ss := &selfService{}
	issued := auth.NewIssued(nil)
	ledger, err := billing.NewLedger(context.Background(), records, nil, logger)
	if err != nil {
		return nil, err
	}
	ss.writes = &store.WriteHealth{}
	ledger.ReportWrites(ss.writes)
	var hist *billing.Recorder
	if cfg.HistoryEnabled() {
		hist = billing.NewRecorder(records, cfg.UsageHistory.Retention, nil, logger)
		hist.SetHourlyRetention(cfg.UsageHistory.HourlyRetention)
		hist.SetDistinctValues(cfg.UsageHistory.DistinctValues)
		hist.ReportWrites(ss.writes)
	}
	// The server is built after these (it serves them); requests and loops only start once it is.
	state := func() *config.Config { cfg, _ := ss.srv.State(); return cfg }
	ss.alerts, err = newAlerting(cfg, records, figures{state: state, ledger: ledger, limiter: limiter, issued: issued}, logger)
	if err != nil {
		return nil, err
	}
	ss.checkEvery = cfg.Alerts.CheckInterval
	ss.audit = audit.New(records, nil)
	api, err := admin.New(admin.Deps{Store: records, Issued: issued, Limiter: limiter, Ledger: ledger, History: hist, Audit: ss.audit, Logger: logger,
		KeyEvents: ss.alerts.watcher,
		State:     func() (*config.Config, *auth.Authenticator) { return ss.srv.State() }})
	if err != nil {
		return nil, err
	}
	ss.api = api
	ss.calib = calibration.New(records, nil, logger)
	ss.breakers = newBreakers(cfg, records, logger)
	ss.deps = proxy.Deps{Admin: api, Issued: issued, Ledger: ledger, History: hist, Calibration: ss.calib, Alerts: ss.alerts.watcher,
		StoreWrites: ss.writes}
	return ss, nil
}

// start runs the loops: the issued-key poll, the spend and history flushes (every second,
// off the request path), and the calibration's sync (every calibrationSync).
func (ss *selfService) start(srv *proxy.Server) {
	ss.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	ss.cancel = cancel
	ss.wg.Go(func() { ss.api.Run(ctx) })
	ss.wg.Go(func() { ss.deps.Ledger.Run(ctx, time.Second) })
	if ss.deps.History != nil {
		ss.wg.Go(func() { ss.deps.History.Run(ctx, time.Second) })
	}
	ss.wg.Go(func() { ss.calib.Run(ctx, calibrationSync) })
	ss.wg.Go(func() { ss.breakers.Run(ctx, breakerSync) })
	ss.wg.Go(func() { ss.alerts.sender.Run(ctx) })
	ss.wg.Go(func() { ss.alerts.watcher.Run(ctx, ss.checkEvery) })
}

// reloaded takes what a config reload changes of self-service: the alerts' webhooks.
func (ss *selfService) reloaded(cfg *config.Config) {
	ss.alerts.sender.SetWebhooks(cfg.Alerts.Webhooks)
}

// breakerSync is how often a replica looks for breakers the others opened or closed: one
// version read per sync, the state bucket read only when it changed. A breaker this
// replica trips or probes acts here at once.
const breakerSync = time.Second

// newBreakers builds the process's circuit breakers from upstream.breaker. They are built
// once, from the config at start: a reload keeps every breaker's state (and its settings).
// They share through the record store only when it is Redis: the bbolt file has no other
// replica to share with, and would cost a synced write per failure.
func newBreakers(cfg *config.Config, records store.Store, logger *slog.Logger) *breaker.Set {
	if !redisconn.IsRedis(cfg.Ratelimit.Store) {
		records = nil
	}
	b := cfg.Upstream.Breaker
	failures := 0
	if b.Failures != nil {
		failures = *b.Failures
	}
	return breaker.New(breaker.Options{Store: records, Log: logger, Settings: breaker.Settings{
		Failures: failures, Window: b.Window, Cooldown: b.Cooldown, MaxCooldown: config.BreakerMaxCooldown}})
}

// calibrationSync is how often a replica writes its calibration samples and reads the other
// replicas'. Its own samples count at once; each sync reads the whole calibration bucket
// (on Redis a SCAN), so it runs far less often than the spend flush.
const calibrationSync = 10 * time.Second

// stop ends the loops after a last flush; the store must still be open.
func (ss *selfService) stop() {
	if ss.cancel != nil {
		ss.cancel()
	}
	ss.wg.Wait()
}

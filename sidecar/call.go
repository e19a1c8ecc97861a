package sidecar

import (
	"context"

	"modelgate/config"
	"modelgate/reqlog"
	"modelgate/upstream"
)

// What the server in front builds a Call from, and reads back of it, is here so that its
// admission hands the routes a Call in a few lines and knows nothing of the fields.

// SettingsOf is the routes' settings in cfg (a reloaded config applies to the next call).
func SettingsOf(cfg *config.Config) Settings {
	return Settings{
		RequestTimeout:    cfg.Upstream.RequestTimeout,
		BalanceCacheTTL:   cfg.Sidecar.BalanceCacheTTL,
		MaxUploadBytes:    cfg.Server.MaxUploadBytes,
		UploadIdleTimeout: cfg.Server.UploadIdleTimeout,
	}
}

// Report copies what the routes noted of the call into the request's record: the answer's
// code and upstream failure when they set one, and a client gone (never unset).
func (c *Call) Report(rec *reqlog.Record) {
	if c.ErrCode != "" {
		rec.ErrCode = c.ErrCode
	}
	if c.UpstreamErr != "" {
		rec.UpstreamErr = c.UpstreamErr
	}
	rec.ClientClosed = rec.ClientClosed || c.ClientGone
}

// LenderKeys lends one caller's platform keys to the routes through the gateway's
// upstream.Lender; only the lease's type is adapted to Keys.
type LenderKeys struct{ *upstream.Lender }

// Lease lends one key (upstream.Lender.Lease) as a Lease.
func (k LenderKeys) Lease(ctx context.Context) (context.Context, Lease) {
	ctx, l := k.Lender.Lease(ctx)
	return ctx, l
}

package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"modelgate/proxy"
	"modelgate/ratelimit"
	"modelgate/tracing"
)

// drainSettleGrace bounds how long a drain that ran out of time waits, after closing the
// remaining connections, for their handlers to settle what they used.
const drainSettleGrace = 5 * time.Second

// drain stops accepting connections and lets in-flight requests and streams finish, up to
// timeout; after that the remaining connections are closed. The limiter closes last: once
// every handler has settled, or, when some are still running after drainSettleGrace, with
// their tickets settled at their reservation (see ratelimit.Limiter.Close).
func drain(hs *http.Server, srv *proxy.Server, limiter *ratelimit.Limiter, timeout time.Duration, logger *slog.Logger, tracer *tracing.Tracer) error {
	logger.Info("draining", "timeout", timeout.String())
	srv.StartDrain()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	serving := ctx
	if tracer != nil {
		// The last part of the drain is kept for exporting the spans of the requests that
		// finished, so the whole stop still fits in the timeout.
		var stop context.CancelFunc
		serving, stop = context.WithTimeout(ctx, timeout-flushReserve(timeout))
		defer stop()
	}
	// WebSocket connections were hijacked from the HTTP server, whose Shutdown does not see
	// them: their turns in flight finish, then they are closed, beside it.
	sockets := make(chan struct{})
	go func() {
		srv.DrainSockets(serving)
		close(sockets)
	}()
	if err := hs.Shutdown(serving); err != nil {
		logger.Warn("drain timeout reached; closing remaining connections")
		_ = hs.Close()
		if tracer != nil {
			// The handlers of the connections just closed end their spans as they notice;
			// half of what is left is theirs, the rest the export's.
			wctx, cancel := context.WithTimeout(ctx, time.Until(deadlineOf(ctx))/2)
			srv.WaitTraced(wctx)
			cancel()
		}
	}
	<-sockets
	// Background responses get what is left of the serving time, then are cancelled and
	// recorded failed.
	srv.DrainBackground(serving)
	// Shutdown does not wait for handlers of connections it closed, nor for hijacked ones:
	// wait for what they admitted to settle.
	grace, stop := context.WithTimeout(context.Background(), drainSettleGrace)
	defer stop()
	if !srv.WaitSettled(grace) {
		logger.Warn("handlers still running after the drain; settling them at their reservation", "open_tickets", limiter.Open())
	}
	if err := limiter.Close(); err != nil {
		logger.Warn("closing the limiter", "error", err.Error())
	}
	// Last, in the part of the drain kept for it: the spans of everything that ended above.
	if err := tracer.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans not all exported before the drain timeout", "error", err.Error())
	}
	logger.Info("stopped")
	return nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// flushReserve is the part of a drain kept for the last span export: a tenth, at most 2s.
func flushReserve(timeout time.Duration) time.Duration {
	return min(timeout/10, 2*time.Second)
}

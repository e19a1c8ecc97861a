package main

import (
	"context"
	"log/slog"
	"time"

	"modelgate/proxy"
)

// settleCrashed charges, before the first request is served, the calls a previous life of
// this replica was killed holding (its admission journal): the usage the platform may have
// billed for them, and their concurrency slots freed. A store that cannot be read leaves them
// for the next start, logged.
func settleCrashed(srv *proxy.Server, replica string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := srv.SettleCrashed(ctx)
	if err != nil {
		logger.Error("calls left open by the previous run not all charged", "replica", replica, "charged", n, "error", err.Error())
		return
	}
	if n > 0 {
		logger.Warn("calls left open by the previous run charged at their reservation", "replica", replica, "calls", n)
	}
}

package billing

import (
	"context"
	"log/slog"
	"time"

	"modelgate/periodic"
)

// flushEvery is the loop the ledger and the usage history run to write their batches: flush
// every interval until ctx ends, then once more under a fresh context so what is pending
// when the process stops is not lost. A failed flush keeps its batch for the next one, so
// it is only logged, under what; after a flush that succeeded, then (when not nil) runs.
func flushEvery(ctx context.Context, every time.Duration, log *slog.Logger, what string,
	flush func(context.Context) error, then func(context.Context)) {
	periodic.Every(ctx, every, func(ctx context.Context) {
		if err := flush(ctx); err != nil {
			log.Warn(what+": flush failed; will retry", "err", err.Error())
			return
		}
		if then != nil {
			then(ctx)
		}
	})
	if err := flush(context.Background()); err != nil {
		log.Warn(what+": final flush failed", "err", err.Error())
	}
}

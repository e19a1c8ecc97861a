// Package periodic runs the process's background loops: a poll, a probe or a flush that
// repeats at a fixed interval until its context ends.
package periodic

import (
	"context"
	"time"
)

// Every calls fn every interval, with ctx, until ctx ends; it returns then. The first call
// comes one interval after the start, and a call that outlasts the interval delays the next
// rather than stacking up behind it. every must be positive, as for time.NewTicker.
func Every(ctx context.Context, every time.Duration, fn func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

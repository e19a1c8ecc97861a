package billing

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// flushEvery flushes on each tick and runs then only after a flush that succeeded; when its
// context ends it flushes once more, under a context that is still live. The second tick's
// flush ends the loop's context, so the test needs no clock of its own.
func TestFlushEvery(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flushErr  error
		wantThens int
	}{
		{"flushed", nil, 2},
		{"flush_failed", errors.New("store down"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var flushed []context.Context
			thens := 0
			flush := func(c context.Context) error {
				if flushed = append(flushed, c); len(flushed) == 2 {
					cancel()
				}
				return tc.flushErr
			}
			flushEvery(ctx, time.Millisecond, slog.New(slog.DiscardHandler), "test", flush,
				func(context.Context) { thens++ })
			if len(flushed) != 3 {
				t.Fatalf("%d flushes, want 2 on ticks and a final one", len(flushed))
			}
			if final := flushed[2]; final.Err() != nil {
				t.Errorf("final flush under an ended context: %v", final.Err())
			}
			if thens != tc.wantThens {
				t.Errorf("then ran %d times, want %d", thens, tc.wantThens)
			}
		})
	}
}

package billing

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// flushEvery flushes on each tick, runs then only after a flush that succeeded, and flushes
// once more under a live context when its own context ends.
func TestFlushEvery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flushErr error
		wantThen bool
	}{
		{"flushed", nil, true},
		{"flush_failed", errors.New("store down"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			flushes := make(chan context.Context) // unbuffered: each flush waits for the test
			thens := make(chan struct{}, 16)
			done := make(chan struct{})
			go func() {
				defer close(done)
				flushEvery(ctx, time.Millisecond, slog.New(slog.DiscardHandler), "test",
					func(c context.Context) error { flushes <- c; return tc.flushErr },
					func(context.Context) { thens <- struct{}{} })
			}()
			for range 2 {
				select {
				case <-flushes:
				case <-time.After(10 * time.Second):
					t.Fatal("no flush within 10s at an interval of 1ms")
				}
			}
			cancel()
			var last context.Context
			for wait := true; wait; {
				select {
				case last = <-flushes:
				case <-done:
					wait = false
				case <-time.After(10 * time.Second):
					t.Fatal("flushEvery did not return after its context ended")
				}
			}
			if last == nil || last.Err() != nil {
				t.Errorf("final flush under context %v; want a live one", last)
			}
			if got := len(thens) > 0; got != tc.wantThen {
				t.Errorf("then ran: %v, want %v", got, tc.wantThen)
			}
		})
	}
}

package periodic

import (
	"context"
	"testing"
	"time"
)

// Every keeps calling, with the loop's context, until that context ends, then returns. The
// callback ends the context itself on its third call, so the test needs no clock of its own.
func TestEveryRepeatsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	Every(ctx, time.Millisecond, func(got context.Context) {
		if got != ctx {
			t.Error("fn was not handed the loop's context")
		}
		if calls++; calls == 3 {
			cancel()
		}
	})
	if calls != 3 {
		t.Errorf("%d calls, want 3: a call after the context ended", calls)
	}
}

// A context that has already ended returns at once, before any call.
func TestEveryEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Every(ctx, time.Hour, func(context.Context) { t.Error("called after the context ended") })
}

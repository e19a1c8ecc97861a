package periodic

import (
	"context"
	"testing"
	"time"
)

// Every keeps calling until its context ends, then returns without another call.
func TestEveryRepeatsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{})
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Every(ctx, time.Millisecond, func(got context.Context) {
			if got != ctx {
				t.Error("fn was not handed the loop's context")
			}
			calls <- struct{}{}
		})
	}()
	for range 3 {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("fewer than 3 calls within 10s at an interval of 1ms")
		}
	}
	cancel()
	for {
		select {
		case <-returned:
			return
		case <-calls: // a tick that raced the cancel
		case <-time.After(10 * time.Second):
			t.Fatal("Every did not return after its context ended")
		}
	}
}

// A context that has already ended returns at once, before any call.
func TestEveryEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Every(ctx, time.Hour, func(context.Context) { t.Error("called after the context ended") })
}

package apitest

import (
	"testing"
	"time"
)

// WaitFor polls cond every few milliseconds until it holds, and fails the test once within
// has passed without it: for what a test cannot be told of directly (a goroutine's delivery,
// another process's write), so the bound is generous and the wait as short as the event.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
			return // a stand-in t may not stop the goroutine
		}
		time.Sleep(5 * time.Millisecond)
	}
}

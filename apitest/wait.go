package apitest

import (
	"testing"
	"time"
)

// Eventually polls cond every few milliseconds until it holds (true) or within has passed
// (false): for what a test cannot be told of directly (a goroutine's delivery, another
// process's write), so the bound is generous and the wait as short as the event.
func Eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// WaitFor is Eventually that fails the test, naming what it waited for, when cond does not
// come to hold within the bound.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(within, cond) {
		t.Fatalf("waited %v for %s", within, what)
	}
}

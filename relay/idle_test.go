package relay

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
)

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	return apitest.Eventually(d, cond)
}

// Issue 18: the idle timer measures the platform's silence while modelgate waits for it, not
// the time modelgate spends blocked writing to a slow client.
func TestIdleTimerIgnoresTimeSpentWriting(t *testing.T) {
	cancelled := false
	cancel := func() { cancelled = true }
	it := NewIdleTimer(time.Hour, cancel) // fired by hand below, never by itself
	defer it.Stop()
	r := &IdleReader{R: strings.NewReader("event bytes"), Idle: it}
	if _, err := r.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	// The relay has been writing that read's events to a slow client for two hours.
	it.last.Store(MonoNow() - int64(2*time.Hour))
	it.expire(cancel)
	if cancelled || it.Fired() {
		t.Fatal("a relay blocked on its client was cut as idle")
	}

	// A read that has waited for the platform longer than the window is cut.
	pr, pw := io.Pipe()
	defer pw.Close()
	r = &IdleReader{R: pr, Idle: it}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Read(make([]byte, 64))
	}()
	if !waitFor(5*time.Second, it.waiting.Load) {
		t.Fatal("the read did not start")
	}
	it.last.Store(MonoNow() - int64(2*time.Hour))
	it.expire(cancel)
	if !cancelled || !it.Fired() {
		t.Error("a platform silent for longer than the window was not cut")
	}
	pw.CloseWithError(errors.New("done"))
	<-done
}

// A silent upstream is cut by the timer itself, through the context it was given.
func TestIdleTimerCutsSilence(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	it := NewIdleTimer(20*time.Millisecond, func() { pw.CloseWithError(errors.New("cut")) })
	defer it.Stop()
	r := &IdleReader{R: pr, Idle: it}
	if _, err := r.Read(make([]byte, 8)); err == nil || !it.Fired() {
		t.Fatalf("read = %v, fired %t: want the silence cut", err, it.Fired())
	}
}

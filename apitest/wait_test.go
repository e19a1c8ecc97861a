package apitest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records the message instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper()                        {}
func (f *fatalRecorder) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

func TestWaitFor(t *testing.T) {
	calls := 0
	WaitFor(t, 10*time.Second, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("cond called %d times, want 3 (it held at the third)", calls)
	}

	f := &fatalRecorder{}
	start := time.Now()
	WaitFor(f, 20*time.Millisecond, "what never comes", func() bool { return false })
	if !strings.Contains(f.msg, "what never comes") || time.Since(start) < 20*time.Millisecond {
		t.Errorf("after %v: %q, want a failure naming what it waited for once the bound passed", time.Since(start), f.msg)
	}
}

func TestEventually(t *testing.T) {
	calls := 0
	if !Eventually(10*time.Second, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Errorf("cond called %d times, want true at the third", calls)
	}
	start := time.Now()
	if Eventually(20*time.Millisecond, func() bool { return false }) || time.Since(start) < 20*time.Millisecond {
		t.Errorf("a cond that never holds: true, or false before the bound (after %v)", time.Since(start))
	}
}

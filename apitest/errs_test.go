package apitest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// failRecorder is a testing.TB whose Fatal and Fatalf record the failure and end the
// goroutine, as they end a test's.
type failRecorder struct {
	testing.TB
	failed bool
	msg    string
}

func (f *failRecorder) Helper() {}
func (f *failRecorder) Fatal(a ...any) {
	f.failed, f.msg = true, fmt.Sprint(a...)
	runtime.Goexit()
}
func (f *failRecorder) Fatalf(format string, a ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, a...)
	runtime.Goexit()
}

// recorded runs fn on a failRecorder, in a goroutine of its own for its Fatal to end.
func recorded(t *testing.T, fn func(testing.TB)) *failRecorder {
	rec := &failRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	return rec
}

// TestErrWanted runs ErrWanted on a recording TB: a wanted error ends the case, a missing,
// wrong or unexpected one fails the test.
func TestErrWanted(t *testing.T) {
	boom := errors.New("config: limits.rpm: must not be negative")
	for _, tc := range []struct {
		name       string
		err        error
		want       string
		wanted     bool
		wantFailed bool
	}{
		{"valid", nil, "", false, false},
		{"wanted", boom, "must not be negative", true, false},
		{"missing", nil, "must not be negative", true, true},
		{"wrong", boom, "is empty", true, true},
		{"unexpected", boom, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wanted bool
			rec := recorded(t, func(tb testing.TB) { wanted = ErrWanted(tb, tc.err, tc.want) })
			if rec.failed != tc.wantFailed {
				t.Fatalf("failed %v, want %v (%s)", rec.failed, tc.wantFailed, rec.msg)
			}
			if !tc.wantFailed && wanted != tc.wanted {
				t.Fatalf("ErrWanted = %v, want %v", wanted, tc.wanted)
			}
		})
	}
}

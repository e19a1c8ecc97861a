package overhead

import (
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// The overhead is stamped once, before the first byte, as the time since the start minus
// the platform's wait, never below zero; a header already sent is left alone.
func TestWriterStampsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ago   time.Duration
		wait  time.Duration
		write func(w *Writer)
		atMin float64 // the stated milliseconds are at least this
		atMax float64 // and at most this
	}{
		{"write", 50 * time.Millisecond, 30 * time.Millisecond, func(w *Writer) { _, _ = w.Write([]byte("x")) }, 20, 10_000},
		{"flush", 10 * time.Millisecond, 0, func(w *Writer) { w.Flush() }, 10, 10_000},
		{"header_now", 0, 0, func(w *Writer) { w.WriteHeaderNow() }, 0, 10_000},
		{"wait_longer", 0, time.Hour, func(w *Writer) { _, _ = w.WriteString("x") }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(rec)
			var wait atomic.Int64
			wait.Store(int64(tc.wait))
			w := Wrap(c.Writer, time.Now().Add(-tc.ago), &wait)
			tc.write(w)
			first := rec.Header().Get(Header)
			ms, err := strconv.ParseFloat(first, 64)
			if err != nil || ms < tc.atMin || ms > tc.atMax {
				t.Fatalf("%s = %q, want %v..%v ms", Header, first, tc.atMin, tc.atMax)
			}
			wait.Store(0)
			_, _ = w.Write([]byte("more"))
			if got := rec.Header().Get(Header); got != first {
				t.Errorf("restamped: %q then %q", first, got)
			}
			if w.Unwrap() != c.Writer {
				t.Error("Unwrap does not reach the wrapped writer")
			}
		})
	}
}

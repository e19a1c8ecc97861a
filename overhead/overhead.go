// Package overhead states on an answer the time modelgate itself spent on the request
// (server.overhead_header): the handler's time until the answer's headers go out, minus the
// time it waited on the platform.
package overhead

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// Header states the time modelgate itself spent on a request, in milliseconds.
const Header = "X-Modelgate-Overhead-Ms"

// Writer puts Header on the answer just before its headers go out: the time since start
// minus the wait (nanoseconds) the platform calls added up. For a non-stream answer that is
// all of modelgate's work but writing the body; for a stream it is the time until the
// stream started (the events after that are relayed as they come, see bench/).
type Writer struct {
	gin.ResponseWriter
	start time.Time
	wait  *atomic.Int64
	done  bool
}

// Wrap is w stating the overhead of a request that started at start and waited wait on
// the platform.
func Wrap(w gin.ResponseWriter, start time.Time, wait *atomic.Int64) *Writer {
	return &Writer{ResponseWriter: w, start: start, wait: wait}
}

func (w *Writer) stamp() {
	if w.done || w.ResponseWriter.Written() {
		return
	}
	w.done = true
	own := max(time.Since(w.start)-time.Duration(w.wait.Load()), 0)
	w.Header().Set(Header, strconv.FormatFloat(float64(own)/float64(time.Millisecond), 'f', 3, 64))
}

// Unwrap lets http.NewResponseController reach the connection (read deadlines, flushes).
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *Writer) WriteHeaderNow() { w.stamp(); w.ResponseWriter.WriteHeaderNow() }

func (w *Writer) Write(p []byte) (int, error) { w.stamp(); return w.ResponseWriter.Write(p) }

func (w *Writer) WriteString(s string) (int, error) {
	w.stamp()
	return w.ResponseWriter.WriteString(s)
}

func (w *Writer) Flush() { w.stamp(); w.ResponseWriter.Flush() }

package sidecar

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// Lingering close.
//
// An upload refused before its body was read to the end (413 past the limit, a bad field, a
// platform that answered early) leaves the client sending. Closing the connection on unread
// bytes makes the kernel answer them with a reset, which also throws away the 413 waiting in
// the client's receive buffer: a client that writes its whole body before reading (no
// Expect: 100-continue, as Node's fetch or a plain socket) sees EPIPE or ECONNRESET instead
// of the answer. net/http drains only 256 KiB after a handler. So the upload route, like
// nginx's lingering_close, sends its answer first and then reads and drops what the client
// still sends, bounded in time and bytes, before the connection is closed.
const (
	// lingerTime bounds the whole drain: a client still sending after it gets the reset.
	lingerTime = 10 * time.Second
	// lingerBytes bounds what is read and dropped: past it, the client is sending far more
	// than any upload allowed and the connection is closed.
	lingerBytes = 128 << 20
)

// answerAndLinger writes the answer with write, then drains the rest of the client's body
// within lingerTime and lingerBytes, and gives up sooner on a client silent for idle (the
// route's upload_idle_timeout; 0 = only lingerTime). The answer is flushed first, so the
// client has it whatever the drain does; the request's concurrency slot stays held while
// the client is still sending to it, at most lingerTime.
func answerAndLinger(c *gin.Context, idle time.Duration, write func()) {
	rc := http.NewResponseController(c.Writer)
	// An HTTP/1 body may otherwise be unreadable once the answer's header is out.
	if err := rc.EnableFullDuplex(); err != nil {
		write()
		return
	}
	write()
	if err := rc.Flush(); err != nil {
		return // the client is gone: nothing to linger for
	}
	drain(rc, c.Request.Body, idle)
}

// drain reads and drops body until its end, an error, lingerBytes, lingerTime, or idle
// without a byte. Real clocks: these are socket deadlines, not times modelgate reasons about.
func drain(rc *http.ResponseController, body io.Reader, idle time.Duration) {
	end := time.Now().Add(lingerTime)
	buf := make([]byte, 32<<10)
	for left := int64(lingerBytes); left > 0; {
		deadline := end
		if idle > 0 {
			if t := time.Now().Add(idle); t.Before(end) {
				deadline = t
			}
		}
		if rc.SetReadDeadline(deadline) != nil {
			return // no deadline can be set: never read without one
		}
		n, err := body.Read(buf[:min(int64(len(buf)), left)])
		left -= int64(n)
		if err != nil {
			return
		}
	}
}

// waitsForContinue reports whether the client asked to be told before it sends its body:
// one refused before any of the body was read never sends it, so there is nothing to drain.
func waitsForContinue(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Expect"), "100-continue")
}

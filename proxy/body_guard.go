package proxy

import (
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// inflateBudget is the room the whole process gives to gzip request bodies being inflated:
// a few kilobytes of gzip can ask for tens of megabytes each, so the sum is bounded, not
// only each body (server.max_inflating_bytes). A body that cannot get room is refused, never
// queued: waiting would hold its connection and what it inflated so far.
type inflateBudget struct{ used atomic.Int64 }

// take reserves n more bytes if that keeps the total within max.
func (b *inflateBudget) take(n, max int64) bool {
	for {
		cur := b.used.Load()
		if cur+n > max {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *inflateBudget) give(n int64) { b.used.Add(-n) }

// errInflateBusy ends a body read that could not get room to inflate.
var errInflateBusy = errors.New("proxy: too many request bodies being inflated")

// bodyGuard bounds one request body read: its deadline (server.body_read_timeout) and its
// share of the process's inflating room. Its zero value bounds nothing (a request outside
// a Server, in unit tests).
type bodyGuard struct {
	rc      *http.ResponseController
	timeout time.Duration
	timed   bool // the connection's read deadline is set for this body
	budget  *inflateBudget
	max     int64
	taken   int64
}

// guardBody starts the bounds of c's body read.
func guardBody(c *gin.Context) *bodyGuard {
	g := &bodyGuard{}
	s := info(c).srv
	v, ok := c.Get(stateKey)
	if s == nil || !ok {
		return g
	}
	cfg := v.(*state).cfg.Server
	g.budget, g.max, g.timeout = &s.inflating, cfg.MaxInflatingBytes, cfg.BodyReadTimeout
	if g.timeout > 0 && c.Request.ContentLength != 0 {
		g.rc = http.NewResponseController(c.Writer)
		// The connection's own deadline: a read blocked on a stalled body returns at it, and
		// the connection is not reused (net/http closes it after the answer).
		g.timed = g.rc.SetReadDeadline(time.Now().Add(g.timeout)) == nil
	}
	return g
}

// grow asks for n more bytes of inflating room; without a budget any n is granted.
func (g *bodyGuard) grow(n int64) bool {
	if g.budget == nil || g.max <= 0 {
		return true
	}
	if !g.budget.take(n, g.max) {
		return false
	}
	g.taken += n
	return true
}

// done gives the inflating room back once the body is read (or refused): the room bounds
// bodies being inflated, and a body read whole is no longer one. After a whole read the
// deadline is lifted, so it can never cut the answer or a long stream: net/http's check for
// a client that went away reads the same connection. After a failed read it stays, bounding
// what net/http still reads of the body to discard it.
func (g *bodyGuard) done(readWhole bool) {
	if g.taken > 0 {
		g.budget.give(g.taken)
		g.taken = 0
	}
	if g.timed && readWhole {
		_ = g.rc.SetReadDeadline(time.Time{})
		g.timed = false
	}
}

// abandonBody is for a request refused before its body was read whole: net/http would read
// up to 256 KB of what is left before it writes the answer, waiting on a stalled body, so the
// connection's read deadline is set to now. The answer goes out at once and the connection
// closes after it.
func abandonBody(c *gin.Context) {
	if c.Request.ContentLength == 0 {
		return
	}
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
}

// bodyTimedOut reports whether a body read failed at its deadline.
func bodyTimedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

package reqbody

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// Budget is the room the whole process gives to gzip request bodies being inflated: a few
// kilobytes of gzip can ask for tens of megabytes each, so the sum is bounded, not only each
// body (server.max_inflating_bytes). A body that cannot get room is refused, never queued:
// waiting would hold its connection and what it inflated so far. A server owns one Budget
// and hands it to every Read through Limits; the zero value is empty and ready.
type Budget struct{ used atomic.Int64 }

// Used is the room held now by bodies being inflated.
func (b *Budget) Used() int64 { return b.used.Load() }

// take reserves n more bytes if that keeps the total within max.
func (b *Budget) take(n, max int64) bool { return addWithin(&b.used, n, max) }

// addWithin adds n to used if that keeps it within max, as one step against every other
// taker: both rooms (Budget and Room) are shared by all requests at once.
func addWithin(used *atomic.Int64, n, max int64) bool {
	for {
		cur := used.Load()
		if cur+n > max {
			return false
		}
		if used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *Budget) give(n int64) { b.used.Add(-n) }

// guard bounds one body read: its connection deadline, its share of the inflating room and
// of the process's room for bodies held. It lives on Read's stack; its zero value bounds
// nothing.
type guard struct {
	rc     *http.ResponseController
	timed  bool // the connection's read deadline is set for this body
	budget *Budget
	max    int64
	taken  int64

	ctx     context.Context // the request's: a wait for room ends with it
	room    *Room
	roomMax int64
	wait    time.Duration
	held    *Held // the caller's, or own when the caller keeps none
	own     Held
}

// start sets the read deadline of l for r's body, when there is a body to wait for.
func (g *guard) start(w http.ResponseWriter, r *http.Request, l Limits) {
	g.budget, g.max = l.Budget, l.MaxInflating
	g.ctx, g.room, g.roomMax, g.wait, g.held = r.Context(), l.Room, l.MaxInflight, l.RoomWait, l.Held
	if g.held == nil {
		g.held = &g.own
	}
	if l.Timeout > 0 && r.ContentLength != 0 {
		g.rc = http.NewResponseController(w)
		// The connection's own deadline: a read blocked on a stalled body returns at it, and
		// the connection is not reused (net/http closes it after the answer). A writer without
		// deadlines (a test's recorder) leaves nothing to lift.
		g.timed = g.rc.SetReadDeadline(time.Now().Add(l.Timeout)) == nil
	}
}

// grow asks for n more bytes of room to hold the body, and of inflating room when the body
// is being inflated; what is not bounded is granted. The inflating room is refused at once
// (errNoRoom); room to hold the body may be waited for (errFull when it never came).
func (g *guard) grow(n int64, inflating bool) error {
	if inflating && g.budget != nil && g.max > 0 {
		if !g.budget.take(n, g.max) {
			return errNoRoom
		}
		g.taken += n
	}
	if g.room != nil {
		if !g.room.Take(g.ctx, n, g.roomMax, g.wait) {
			return errFull
		}
		g.held.add(g.room, n)
	}
	return nil
}

// done gives the inflating room back once the body is read (or refused): the room bounds
// bodies being inflated, and a body read whole is no longer one. The room holding the body
// is given back too when the read failed (the body is dropped) or the caller keeps no Held.
// After a whole read the deadline is lifted, so it can never cut the answer or a long
// stream: net/http's check for a client that went away reads the same connection. After a
// failed read it stays, bounding what net/http still reads of the body to discard it.
func (g *guard) done(readWhole bool) {
	if g.taken > 0 {
		g.budget.give(g.taken)
		g.taken = 0
	}
	if !readWhole || g.held == &g.own {
		g.held.Release()
	}
	if g.timed && readWhole {
		_ = g.rc.SetReadDeadline(time.Time{})
		g.timed = false
	}
}

// Abandon is for a request refused before its body was read whole: net/http would read up
// to 256 KB of what is left before it writes the answer, waiting on a stalled body, so the
// connection's read deadline is set to now. The answer goes out at once and the connection
// closes after it.
func Abandon(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

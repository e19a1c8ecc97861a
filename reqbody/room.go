package reqbody

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Room is the memory the whole process gives to what requests hold of their bodies
// (server.max_inflight_body_bytes): every body being read, or read and not yet sent on, and
// whatever else a caller charges to it (the WebSocket mode's queued messages). A body takes
// room before each allocation of its buffer, so the figure is what is allocated, never what
// a client declared. A request that finds no room may wait a little for some to be given
// back: bodies come and go within milliseconds, while refusing at once would turn a brief
// burst into errors. A server owns one Room; its zero value is empty and ready.
type Room struct {
	used    atomic.Int64
	waiters atomic.Int32
	mu      sync.Mutex
	freed   chan struct{} // closed, and forgotten, when room is given back while someone waits
}

// Used is the room held now.
func (r *Room) Used() int64 { return r.used.Load() }

// TryTake takes n bytes of room if that keeps the total within max; max of 0 or less bounds
// nothing (the room is still counted).
func (r *Room) TryTake(n, max int64) bool {
	if max <= 0 {
		r.used.Add(n)
		return true
	}
	return addWithin(&r.used, n, max)
}

// Take is TryTake that, when the room is full, waits up to wait for enough to be given back,
// or until ctx ends. A request larger than max alone never fits and is refused at once.
func (r *Room) Take(ctx context.Context, n, max int64, wait time.Duration) bool {
	if r.TryTake(n, max) {
		return true
	}
	if wait <= 0 || n > max || ctx.Err() != nil {
		return false
	}
	r.waiters.Add(1)
	defer r.waiters.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// The channel is taken before trying again: room given back after the try closes
		// it (Give sees this waiter), room given back before it is seen by the try.
		r.mu.Lock()
		if r.freed == nil {
			r.freed = make(chan struct{})
		}
		freed := r.freed
		r.mu.Unlock()
		if r.TryTake(n, max) {
			return true
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		}
	}
}

// Force takes n bytes of room whatever the total: for what is held anyway and must be
// counted (a WebSocket message already read, allowed to wait), so the room's figure stays
// the truth and the bodies after it find less.
func (r *Room) Force(n int64) { r.used.Add(n) }

// Give gives back n bytes of room taken before, and wakes whoever waits for room.
func (r *Room) Give(n int64) {
	if n == 0 {
		return
	}
	r.used.Add(-n)
	if r.waiters.Load() == 0 {
		return
	}
	r.mu.Lock()
	if r.freed != nil {
		close(r.freed)
		r.freed = nil
	}
	r.mu.Unlock()
}

// Held is the room one request's body holds. Read fills it in; the request gives it back
// with Release once the body (or what was made of it for the platform) is no longer held,
// and at its end in any case. Release is idempotent, so an early release and the final one
// never give back twice. Not safe for concurrent use: a request releases on its own
// goroutine. The zero value holds nothing.
type Held struct {
	room *Room
	n    int64
}

// Bytes is the room held.
func (h *Held) Bytes() int64 { return h.n }

// Release gives the room back.
func (h *Held) Release() {
	if h.n != 0 {
		h.room.Give(h.n)
		h.n = 0
	}
}

// add records n more bytes taken from room.
func (h *Held) add(room *Room, n int64) {
	h.room = room
	h.n += n
}

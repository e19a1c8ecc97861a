package relay

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// IdleTimer ends the upstream call when the platform sent nothing for too long while
// modelgate waited for it. Only time spent waiting in a read counts: a relay blocked writing
// to a slow client is not a silent platform, and cutting it would drop events the platform
// already sent and billed. Resetting a timer on every read costs more than the read itself,
// so a read only notes the time; when the timer fires it re-arms itself for what is left of
// the window, and only a real silence cancels.
type IdleTimer struct {
	t       *time.Timer
	d       time.Duration
	last    atomic.Int64 // MonoNow of the start of the current wait (or of the timer)
	waiting atomic.Bool  // a read from the upstream is under way
	fired   atomic.Bool
	mu      sync.Mutex // orders expiry against stop, off the read path
	stopped bool
}

// monoBase anchors MonoNow: time.Since reads the monotonic clock, immune to wall-clock
// steps. Set once when the package loads and only read afterwards.
var monoBase = time.Now()

// MonoNow is a monotonic instant in nanoseconds: cheap to take on every read, and only
// ever subtracted from another MonoNow.
func MonoNow() int64 { return int64(time.Since(monoBase)) }

// NewIdleTimer calls cancel once the upstream stayed silent for d while read from through
// an IdleReader; d <= 0 disables it. Stop it when the call ends.
func NewIdleTimer(d time.Duration, cancel context.CancelFunc) *IdleTimer {
	it := &IdleTimer{d: d}
	if d > 0 {
		it.last.Store(MonoNow())
		it.t = time.AfterFunc(d, func() { it.expire(cancel) })
	}
	return it
}

func (it *IdleTimer) expire(cancel context.CancelFunc) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.stopped {
		return
	}
	if !it.waiting.Load() {
		// The relay is busy with what it read (writing to the client): the silence, if any,
		// is counted from its next read.
		it.t.Reset(it.d)
		return
	}
	if quiet := time.Duration(MonoNow() - it.last.Load()); quiet < it.d {
		it.t.Reset(it.d - quiet)
		return
	}
	it.fired.Store(true)
	cancel()
}

// Fired reports whether the timer cut the call: the platform went silent.
func (it *IdleTimer) Fired() bool { return it.fired.Load() }

// beginWait notes that a read from the upstream starts: the silence is measured from here,
// since the previous read returned whatever had arrived.
func (it *IdleTimer) beginWait() {
	if it.t != nil {
		it.last.Store(MonoNow())
		it.waiting.Store(true)
	}
}

// endWait notes that a read returned, with bytes or not.
func (it *IdleTimer) endWait() {
	if it.t != nil {
		it.waiting.Store(false)
	}
}

// Stop ends the timer; it returns once no expiry is running.
func (it *IdleTimer) Stop() {
	if it.t != nil {
		it.mu.Lock()
		it.stopped = true
		it.t.Stop()
		it.mu.Unlock()
	}
}

// IdleReader reads the upstream under an IdleTimer: only the time spent inside its reads
// counts as the platform's silence.
type IdleReader struct {
	R    io.Reader
	Idle *IdleTimer
	// Wait, when set, gains the time spent reading: the request's upstream wait, for a
	// client that waits for the whole answer (server.overhead_header).
	Wait *atomic.Int64
}

func (r *IdleReader) Read(p []byte) (int, error) {
	if r.Wait != nil {
		t0 := MonoNow()
		defer func() { r.Wait.Add(MonoNow() - t0) }()
	}
	r.Idle.beginWait()
	n, err := r.R.Read(p)
	r.Idle.endWait()
	return n, err
}

// OpenUpstream is how every relay in this package sets up its upstream: the idle timer over
// cancel and the event reader over the body. Stop the timer and release the reader.
func OpenUpstream(body io.Reader, idle time.Duration, cancel context.CancelFunc, wait *atomic.Int64) (*IdleTimer, *EventReader) {
	it := NewIdleTimer(idle, cancel)
	return it, NewEventReader(&IdleReader{R: body, Idle: it, Wait: wait}, MaxEventSize)
}

// Package journal keeps every admitted model call that has not settled yet in an
// append-only file of the replica's data path, so that a replica killed with calls in flight
// (SIGKILL, an OOM kill, a crash) charges them at its next start on the same data path
// instead of losing their usage (issue 41).
//
// An admission is written before the call leaves for the platform, by the request itself: the
// segment file is allocated whole when it starts and mapped into memory, so appending a
// record is a copy into the file's page cache under the journal's mutex, with no write(2)
// and no hand-off to another goroutine (write.go). The file is not synced: what is in the
// page cache outlives the process being killed, and a sync to disk would cost each call
// milliseconds (a power loss or a crash of the machine is not covered). A settled call's
// entry is cleared lazily, clearDelay after it settled, by a record appended with a later
// admission or on the journal's own tick: never on the settling request's path. When a
// segment is full the journal starts a new one holding only the entries still open and
// removes the old one (segment.go, write.go). The journal is the replica's alone: only a
// restart on the same data path reads it back (Leftover), whatever store the replica uses.
package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// clearEvery is how often the journal appends the clears due when no admission does.
	clearEvery = 250 * time.Millisecond
	// clearDelay is how long a settled call's entry is kept. What its settlement charged
	// reaches the disk or Redis in batches, every second (the spend ledger, the usage
	// history, the memory limiter's day counters); a kill before that would lose it, so the
	// entry stays until those flushes are past, and a kill in between charges the call
	// again (above the bill, never below it).
	clearDelay = 2 * time.Second
	// maxHeldClears bounds the clears held: past it the oldest are written at once.
	maxHeldClears = 1 << 16
	// segmentBytes is a segment's size: past it the journal starts a new one, which
	// writes the open entries (a few hundred bytes per call in flight) once per about
	// 8000 calls.
	segmentBytes = 4 << 20
)

// ErrClosed is Admit's answer after Close.
var ErrClosed = errors.New("journal: closed")

// ErrEntryTooLarge is Admit's answer for an entry larger than a start reads back
// (maxEntryBytes). Written, its record would end its segment's replay there and take the
// entries after it along; refused, it costs the one call its journal entry alone.
var ErrEntryTooLarge = errors.New("journal: entry too large to read back")

// Journal is one replica's journal of admitted calls. Create it with Open.
type Journal struct {
	dir     string
	replica string
	seq     atomic.Uint64
	log     *slog.Logger
	opts    options
	warned  atomic.Int64 // unix nanos of the last write failure logged
	unlock  func()

	// scratch holds admissions' encoding buffers, reused: a record is encoded outside the
	// mutex and copied into the segment under it.
	scratch sync.Pool

	mu     sync.Mutex
	clears []heldClear // in the order the calls settled
	// clearing is clearDue's list of ids, reused: it runs on most admissions.
	clearing []uint64
	left     []Left // what the previous life left open and is not forgotten yet
	closed   bool
	w        writer // the segment appended to and the entries open in it

	stop chan struct{}
	done chan struct{}
}

// options are what tests change.
type options struct {
	now          func() time.Time
	segmentBytes int64
	// beforeWrite, if set, runs before each record is appended; an error fails the append as
	// a failed write would (a full disk).
	beforeWrite func() error
}

// heldClear is a settled call's entry, to be cleared once clearDelay has passed since at.
type heldClear struct {
	id uint64
	at time.Time
}

// Handle names one journaled entry, to clear it once its call settled. The zero Handle
// names none; clearing it does nothing.
type Handle struct{ id uint64 }

// Left is an entry a previous life of the replica left open.
type Left struct {
	ID    uint64
	Entry Entry
}

// Open opens the journal in dir for replica (its id, for the log): it reads what a previous
// life left open (Leftover), carries it into a new segment and starts the clearing tick. A
// second process on the same dir is refused.
func Open(dir, replica string, log *slog.Logger) (*Journal, error) {
	return open(dir, replica, log, options{})
}

func open(dir, replica string, log *slog.Logger, o options) (*Journal, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if dir == "" {
		return nil, errors.New("journal: no data path")
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.segmentBytes <= 0 {
		o.segmentBytes = segmentBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: data_path: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, replica: replica, log: log, opts: o, unlock: unlock,
		stop: make(chan struct{}), done: make(chan struct{})}
	j.scratch.New = func() any { b := make([]byte, 0, 1024); return &b }
	if err := j.recover(); err != nil {
		unlock()
		return nil, err
	}
	go j.run()
	return j, nil
}

// Replica is the id of the replica the journal belongs to.
func (j *Journal) Replica() string { return j.replica }

// Admit writes e and returns once it is in the segment. The returned Handle must be cleared
// when the call settles, even when Admit failed: a write whose outcome is not known (the disk
// failed part way) may still have landed. ctx is not waited on: an admission takes a copy
// and, rarely, a new segment.
func (j *Journal) Admit(_ context.Context, e *Entry) (Handle, error) {
	if j == nil {
		return Handle{}, nil // no journal (tests, tools): nothing to clear
	}
	h := Handle{j.seq.Add(1)}
	sp := j.scratch.Get().(*[]byte)
	*sp = appendAdmit((*sp)[:0], h.id, e)
	if len(*sp) > recordHeader+maxPayload {
		j.putScratch(sp)
		j.warn("journal write refused", ErrEntryTooLarge)
		return Handle{}, ErrEntryTooLarge
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		j.putScratch(sp)
		return Handle{}, ErrClosed
	}
	cerr := j.clearDue(false)
	err := j.appendAdmitted(h.id, *sp)
	j.mu.Unlock()
	// appendAdmitted kept a copy of the record (in the segment) unless the append failed,
	// when it keeps the record itself: the buffer goes back to the pool only in the first case.
	if err == nil {
		j.putScratch(sp)
	} else {
		j.warn("journal write failed", err)
	}
	if cerr != nil {
		j.warn("journal write failed", cerr)
	}
	return h, err
}

func (j *Journal) putScratch(sp *[]byte) {
	if cap(*sp) <= maxPooledEntry {
		j.scratch.Put(sp)
	}
}

// maxPooledEntry keeps an unusually large entry's buffer out of the pool.
const maxPooledEntry = 4 << 10

// Clear forgets h's entry: its call has settled. It writes nothing itself; the clear goes
// with the first admission or tick clearDelay after it.
func (j *Journal) Clear(h Handle) {
	if j == nil || h.id == 0 {
		return
	}
	j.mu.Lock()
	j.clears = append(j.clears, heldClear{h.id, j.opts.now()})
	var err error
	if len(j.clears) >= maxHeldClears && !j.closed {
		err = j.clearDue(false)
	}
	j.mu.Unlock()
	if err != nil {
		j.warn("journal write failed", err)
	}
}

// clearDue appends the clears due (held clearDelay, or past maxHeldClears, or all of them
// with all: the process is stopping with every settlement flushed); j.mu is held.
func (j *Journal) clearDue(all bool) error {
	if len(j.clears) == 0 {
		return nil
	}
	due := j.opts.now().Add(-clearDelay)
	n := 0
	for n < len(j.clears) && (all || !j.clears[n].at.After(due) || len(j.clears)-n > maxHeldClears) {
		n++
	}
	if n == 0 {
		return nil
	}
	ids := j.clearing[:0]
	for _, c := range j.clears[:n] {
		ids = append(ids, c.id)
	}
	j.clearing = ids[:0]
	j.clears = j.clears[n:]
	if len(j.clears) == 0 {
		j.clears = nil // let the array go
	}
	return j.appendClears(ids)
}

// run appends the clears due on each tick, so that they do not wait for an admission.
func (j *Journal) run() {
	defer close(j.done)
	tick := time.NewTicker(clearEvery)
	defer tick.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-tick.C:
		}
		j.mu.Lock()
		var err error
		if !j.closed {
			err = j.clearDue(false)
		}
		j.mu.Unlock()
		if err != nil {
			j.warn("journal write failed", err)
		}
	}
}

// warn logs a failed write, at most once a second so that a failing disk does not flood the
// log.
func (j *Journal) warn(msg string, err error) {
	now := time.Now().UnixNano()
	last := j.warned.Load()
	if now-last < int64(time.Second) || !j.warned.CompareAndSwap(last, now) {
		return
	}
	j.log.Warn(msg, slog.String("error", err.Error()))
}

// Close writes the clears still waiting, closes the segment and releases the journal's
// lock. Entries of calls still open stay: the next start charges them.
func (j *Journal) Close() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	j.mu.Unlock()
	close(j.stop)
	<-j.done
	j.mu.Lock()
	if err := j.clearDue(true); err != nil {
		j.warn("journal write failed", err)
	}
	j.w.close(true)
	j.mu.Unlock()
	j.unlock()
}

// Leftover returns the entries the replica's previous life left open (no settlement cleared
// them): the calls it had in flight when it died, in the order they were admitted, until
// Forget. An entry whose record is whole but unreadable was logged at Open and is returned
// with its id alone (Entry zero), so that Forget removes it.
func (j *Journal) Leftover(context.Context) ([]Left, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Left(nil), j.left...), nil
}

// Forget clears leftover entries once they have been charged, and returns once that is
// written.
func (j *Journal) Forget(_ context.Context, left []Left) error {
	if len(left) == 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return ErrClosed
	}
	gone := map[uint64]bool{}
	ids := make([]uint64, 0, len(left))
	for _, l := range left {
		ids = append(ids, l.ID)
		gone[l.ID] = true
	}
	kept := j.left[:0]
	for _, l := range j.left {
		if !gone[l.ID] {
			kept = append(kept, l)
		}
	}
	j.left = kept
	return j.appendClears(ids)
}

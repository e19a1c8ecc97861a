// Package journal keeps every admitted model call that has not settled yet in an
// append-only file of the replica's data path, so that a replica killed with calls in flight
// (SIGKILL, an OOM kill, a crash) charges them at its next start on the same data path
// instead of losing their usage (issue 41).
//
// An admission is written before the call leaves for the platform. Writes are group
// committed: one writer takes every admission waiting and appends them with one write(2),
// so concurrent admissions share a write instead of queueing for one each. The file is not
// synced: a write that returned is in the page cache, which outlives the process being
// killed, and a sync to disk would cost each call milliseconds (a power loss or a crash of
// the machine is not covered). A settled call's entry is cleared lazily, clearDelay after it
// settled, by a record appended with a later batch or on the writer's own tick: never by a
// write of its own on the request's path. When the file passes a bound the writer starts a
// new one holding only the entries still open (it keeps them in memory) and removes the old
// one (segment.go, write.go). The journal is the replica's alone: only a restart on the
// same data path reads it back (Leftover), whatever store the replica uses.
package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// clearEvery is how often the writer looks for clears due when no admission wakes it.
	clearEvery = 250 * time.Millisecond
	// clearDelay is how long a settled call's entry is kept. What its settlement charged
	// reaches the disk or Redis in batches, every second (the spend ledger, the usage
	// history, the memory limiter's day counters); a kill before that would lose it, so the
	// entry stays until those flushes are past, and a kill in between charges the call
	// again (above the bill, never below it).
	clearDelay = 2 * time.Second
	// maxHeldClears bounds the clears held: past it the oldest are written at once.
	maxHeldClears = 1 << 16
	// segmentBytes is the size past which the writer starts a new segment. A rotation
	// writes the open entries (a few hundred bytes per call in flight) once per this many
	// bytes of admissions and clears: about 8000 calls.
	segmentBytes = 4 << 20
)

// ErrClosed is Admit's answer after Close.
var ErrClosed = errors.New("journal: closed")

// Journal is one replica's journal of admitted calls. Create it with Open.
type Journal struct {
	dir     string
	replica string
	seq     atomic.Uint64
	log     *slog.Logger
	opts    options
	warned  atomic.Int64 // unix nanos of the last write failure logged
	unlock  func()

	// pendings are admissions' encoding buffers and channels, reused: an admission
	// allocates its record alone, which the writer keeps until the entry is cleared.
	pendings sync.Pool

	mu      sync.Mutex
	admits  []*pending
	clears  []heldClear // in the order the calls settled
	forgets []uint64    // leftover entries charged: cleared with the next batch
	flushes []chan error
	left    []Left // what the previous life left open and is not forgotten yet
	closed  bool

	// The writer's own: the segment written to and the entries open in it.
	w writer

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// options are what tests change.
type options struct {
	now          func() time.Time
	segmentBytes int64
	// beforeWrite, if set, runs before each batch's write; an error fails the write as
	// the file would (a full disk).
	beforeWrite func() error
}

// heldClear is a settled call's entry, to be cleared once clearDelay has passed since at.
type heldClear struct {
	id uint64
	at time.Time
}

// pending is one admission: its record, and where the writer answers once it is written.
type pending struct {
	id      uint64
	rec     []byte // the record, exactly: the writer keeps it while the entry is open
	scratch []byte // where it is encoded, reused
	done    chan error
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
// life left open (Leftover), carries it into a new segment and starts the writer. A second
// process on the same dir is refused.
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
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	j.pendings.New = func() any { return &pending{scratch: make([]byte, 0, 1024), done: make(chan error, 1)} }
	if err := j.recover(); err != nil {
		unlock()
		return nil, err
	}
	go j.run()
	return j, nil
}

// Replica is the id of the replica the journal belongs to.
func (j *Journal) Replica() string { return j.replica }

// Admit writes e and returns once the batch holding it is written. The returned Handle must
// be cleared when the call settles, even when Admit failed: a write whose outcome is not
// known (the disk failed mid-batch, ctx ended first) may still have landed.
func (j *Journal) Admit(ctx context.Context, e *Entry) (Handle, error) {
	if j == nil {
		return Handle{}, nil // no journal (tests, tools): nothing to clear
	}
	p := j.pendings.Get().(*pending)
	p.id = j.seq.Add(1)
	p.scratch = appendAdmit(p.scratch[:0], p.id, e)
	// Kept, exactly sized, by the writer until the entry is cleared (a rotation writes it
	// again); copied here rather than on the writer, whose time every admission shares.
	p.rec = bytes.Clone(p.scratch)
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		j.pendings.Put(p)
		return Handle{}, ErrClosed
	}
	j.admits = append(j.admits, p)
	j.mu.Unlock()
	j.poke()
	h := Handle{p.id}
	select {
	case err := <-p.done:
		// The batch is written: the writer is done with p, which serves another admission.
		p.rec = nil
		if cap(p.scratch) <= maxPooledEntry {
			j.pendings.Put(p)
		}
		return h, err
	case <-ctx.Done():
		return h, ctx.Err() // p stays the writer's: it is written, and dropped, later
	}
}

// maxPooledEntry keeps an unusually large entry's buffer out of the pool.
const maxPooledEntry = 4 << 10

// poke wakes the writer; one already woken, or writing, takes what waits with its next batch.
func (j *Journal) poke() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Clear forgets h's entry: its call has settled. It writes nothing itself; the clear goes
// with the first batch clearDelay after it.
func (j *Journal) Clear(h Handle) {
	if j == nil || h.id == 0 {
		return
	}
	j.mu.Lock()
	j.clears = append(j.clears, heldClear{h.id, j.opts.now()})
	full := len(j.clears) >= maxHeldClears
	j.mu.Unlock()
	if full {
		j.poke()
	}
}

// run is the one writer: each wake (an admission, a full set of clears, a Forget) or tick
// writes everything waiting in one batch.
func (j *Journal) run() {
	defer close(j.done)
	tick := time.NewTicker(clearEvery)
	defer tick.Stop()
	for {
		select {
		case <-j.stop:
			j.writeDue(true)
			j.w.close()
			return
		case <-j.wake:
			// Admissions that are runnable now (the callers woken by the last batch) get
			// to add themselves first, so that they share this batch instead of each
			// starting one; a lone admission waits for nothing.
			runtime.Gosched()
		case <-tick.C:
		}
		j.writeDue(false)
	}
}

// warn logs a failed write, at most once a second so that a failing disk does not flood the
// log.
func (j *Journal) warn(msg string, err error, admits, clears int) {
	now := time.Now().UnixNano()
	last := j.warned.Load()
	if now-last < int64(time.Second) || !j.warned.CompareAndSwap(last, now) {
		return
	}
	j.log.Warn(msg, slog.String("error", err.Error()), slog.Int("admissions", admits), slog.Int("clears", clears))
}

// Close writes the clears still waiting, stops the writer and releases the journal's lock.
// Entries of calls still open stay: the next start charges them.
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
func (j *Journal) Forget(ctx context.Context, left []Left) error {
	if len(left) == 0 {
		return nil
	}
	done := make(chan error, 1)
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	gone := map[uint64]bool{}
	for _, l := range left {
		j.forgets = append(j.forgets, l.ID)
		gone[l.ID] = true
	}
	kept := j.left[:0]
	for _, l := range j.left {
		if !gone[l.ID] {
			kept = append(kept, l)
		}
	}
	j.left = kept
	j.flushes = append(j.flushes, done)
	j.mu.Unlock()
	j.poke()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

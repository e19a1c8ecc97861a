// Package journal keeps, in the record store, every admitted model call that has not settled
// yet, so that a replica killed with calls in flight (SIGKILL, an OOM kill, a crash) charges
// them at its next start instead of losing their usage (issue 41).
//
// An admission is written before the call leaves for the platform. Writes are group
// committed: one writer takes every admission waiting and writes them in one store batch
// (one bbolt transaction, or one Redis pipeline), so concurrent admissions share a write
// instead of queueing for one each. main gives it the shared record store with Redis, and
// with the embedded store a bbolt file of its own left unsynced: a commit is in the file,
// which is what outliving a kill takes, and a sync to disk would cost each call
// milliseconds (a power loss is not covered). A settled call's entry is cleared lazily,
// clearDelay after it settled, with a later batch or the writer's own tick: never by a write
// of its own on the request's path. Entries are keyed by the replica's stable id
// (ReplicaID): a restart on the same data path reads back what its previous life left open
// (Leftover).
package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/store"
)

// Bucket is the record store bucket of the journal: "<replica id>/<entry id>" -> Entry.
const Bucket = "journal"

const (
	// entryTTL bounds how long an entry that is never cleared (its replica never came back)
	// stays in a shared store. A call runs far shorter; a restart that comes later than this
	// finds nothing left to charge.
	entryTTL = 72 * time.Hour
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
	// writeTimeout bounds one batch.
	writeTimeout = 5 * time.Second
)

// ErrClosed is Admit's answer after Close.
var ErrClosed = errors.New("journal: closed")

// Journal is one replica's journal of admitted calls. Create it with Open.
type Journal struct {
	st      store.Store
	replica string
	boot    string // this life of the replica: entry ids never repeat across restarts
	seq     atomic.Uint64
	log     *slog.Logger
	warned  atomic.Int64 // unix nanos of the last write failure logged

	// pendings are admissions' buffers and channels, reused: an admission allocates its
	// key alone.
	pendings sync.Pool

	mu     sync.Mutex
	admits []*pending
	clears []heldClear // in the order the calls settled
	now    func() time.Time
	closed bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// heldClear is a settled call's entry, to be removed once clearDelay has passed since at.
type heldClear struct {
	key string
	at  time.Time
}

// pending is one admission waiting for its batch.
type pending struct {
	key  string
	val  []byte
	done chan error
}

// Handle names one journaled entry, to clear it once its call settled. The zero Handle
// names none; clearing it does nothing.
type Handle struct{ key string }

// Open starts the journal of replica on st.
func Open(st store.Store, replica string, log *slog.Logger) *Journal {
	return open(st, replica, log, time.Now)
}

// open is Open with the clock clears are timed by.
func open(st store.Store, replica string, log *slog.Logger, now func() time.Time) *Journal {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st.Unversioned(Bucket) // nothing caches the journal: its writes need no version bump
	var b [4]byte
	_, _ = rand.Read(b[:])
	j := &Journal{st: st, replica: replica, boot: hex.EncodeToString(b[:]), log: log, now: now,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	j.pendings.New = func() any { return &pending{val: make([]byte, 0, 1024), done: make(chan error, 1)} }
	go j.run()
	return j
}

// Replica is the id the journal's entries are keyed by.
func (j *Journal) Replica() string { return j.replica }

// Admit writes e and returns once the batch holding it is written. The returned Handle must
// be cleared when the call settles, even when Admit failed: a write whose outcome is not
// known (the store failed mid-batch, ctx ended first) may still have landed.
func (j *Journal) Admit(ctx context.Context, e *Entry) (Handle, error) {
	if j == nil {
		return Handle{}, nil // no journal (tests, tools): nothing to clear
	}
	p := j.pendings.Get().(*pending)
	p.key = j.key(j.seq.Add(1))
	p.val = e.appendJSON(p.val[:0])
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		j.pendings.Put(p)
		return Handle{}, ErrClosed
	}
	j.admits = append(j.admits, p)
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default: // the writer is already woken, or writing: it takes this one with the next batch
	}
	h := Handle{p.key}
	select {
	case err := <-p.done:
		// The batch is written: the writer is done with p, which serves another admission.
		if cap(p.val) <= maxPooledEntry {
			j.pendings.Put(p)
		}
		return h, err
	case <-ctx.Done():
		return h, ctx.Err() // p stays the writer's: it is written, and dropped, later
	}
}

// maxPooledEntry keeps an unusually large entry's buffer out of the pool.
const maxPooledEntry = 4 << 10

// key names the n-th entry of this life of the replica. The sequence is written in fixed
// width so that keys sort in the order they are made: each batch's entries go at the end of
// the file's last pages instead of into pages all over it.
func (j *Journal) key(n uint64) string {
	var b [16]byte
	hex := strconv.AppendUint(b[:0], n, 16)
	pad := "0000000000000000"[:16-len(hex)]
	return j.replica + "/" + j.boot + "-" + pad + string(hex)
}

// Clear forgets h's entry: its call has settled. It writes nothing itself; the clear goes
// with the first batch clearDelay after it.
func (j *Journal) Clear(h Handle) {
	if j == nil || h.key == "" {
		return
	}
	j.mu.Lock()
	j.clears = append(j.clears, heldClear{h.key, j.now()})
	full := len(j.clears) >= maxHeldClears
	j.mu.Unlock()
	if full {
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
}

// run is the one writer: each wake (an admission, a full set of clears) or tick writes
// everything waiting in one batch.
func (j *Journal) run() {
	defer close(j.done)
	tick := time.NewTicker(clearEvery)
	defer tick.Stop()
	for {
		select {
		case <-j.stop:
			j.writeAll()
			return
		case <-j.wake:
			// Admissions that are runnable now (the callers woken by the last batch) get
			// to add themselves first, so that they share this batch instead of each
			// starting one; a lone admission waits for nothing.
			runtime.Gosched()
		case <-tick.C:
		}
		j.write()
	}
}

// write writes the admissions and clears waiting, in one batch. An admission's entry goes
// before any clear of it: a clear is only taken once its Admit returned or gave up, and
// both lists are taken together.
func (j *Journal) write() { j.writeDue(false) }

// writeAll writes what waits, the clears not yet due included: the process is stopping
// with every settlement flushed (Close runs after the stores' last flush).
func (j *Journal) writeAll() { j.writeDue(true) }

func (j *Journal) writeDue(all bool) {
	due := j.now().Add(-clearDelay)
	j.mu.Lock()
	admits := j.admits
	j.admits = nil
	n := 0
	for n < len(j.clears) && (all || !j.clears[n].at.After(due) || len(j.clears)-n > maxHeldClears) {
		n++
	}
	clears := make([]string, n)
	for i := range n {
		clears[i] = j.clears[i].key
	}
	j.clears = j.clears[n:]
	if len(j.clears) == 0 {
		j.clears = nil // let the array go
	}
	j.mu.Unlock()
	if len(admits) == 0 && len(clears) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	err := j.st.Batch(ctx, func(tx store.Tx) error {
		for _, p := range admits {
			if err := tx.Put(Bucket, p.key, p.val, entryTTL); err != nil {
				return err
			}
		}
		for _, k := range clears {
			if err := tx.Remove(Bucket, k); err != nil {
				return err
			}
		}
		return nil
	})
	for _, p := range admits {
		p.done <- err
	}
	if err == nil {
		return
	}
	j.warn("journal write failed", err, len(admits), len(clears))
	// The clears are kept for the next batch, bounded: an entry left behind is charged at
	// its reservation by the next start, above the bill rather than below it.
	j.mu.Lock()
	if room := maxHeldClears - len(j.clears); room > 0 {
		back := make([]heldClear, 0, min(len(clears), room)+len(j.clears))
		for _, k := range clears[:min(len(clears), room)] {
			back = append(back, heldClear{k, time.Time{}}) // due at once
		}
		j.clears = append(back, j.clears...)
	}
	j.mu.Unlock()
}

// warn logs a failed write, at most once a second so that a store outage does not flood the
// log.
func (j *Journal) warn(msg string, err error, admits, clears int) {
	now := time.Now().UnixNano()
	last := j.warned.Load()
	if now-last < int64(time.Second) || !j.warned.CompareAndSwap(last, now) {
		return
	}
	j.log.Warn(msg, slog.String("error", err.Error()), slog.Int("admissions", admits), slog.Int("clears", clears))
}

// Close writes the clears still waiting and stops the writer. Entries of calls still open
// stay: the next start charges them.
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
}

// Left is an entry a previous life of the replica left open.
type Left struct {
	Key   string
	Entry Entry
}

// Leftover returns the entries of the replica that no settlement cleared: the calls its
// previous life had in flight when it died. An entry that cannot be read is logged and
// returned with its key alone (Entry zero), so that Forget removes it.
func (j *Journal) Leftover(ctx context.Context) ([]Left, error) {
	var out []Left
	err := j.st.Scan(ctx, Bucket, j.replica+"/", func(key string, value []byte) error {
		e, err := Decode(value)
		if err != nil {
			j.log.Warn("journal entry unreadable; dropped", slog.String("entry", key), slog.String("error", err.Error()))
			out = append(out, Left{Key: key})
			return nil
		}
		out = append(out, Left{Key: key, Entry: e})
		return nil
	})
	return out, err
}

// Forget removes leftover entries once they have been charged.
func (j *Journal) Forget(ctx context.Context, left []Left) error {
	if len(left) == 0 {
		return nil
	}
	return j.st.Batch(ctx, func(tx store.Tx) error {
		for _, l := range left {
			if err := tx.Remove(Bucket, l.Key); err != nil {
				return err
			}
		}
		return nil
	})
}

package stored

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"modelgate/store"
)

// Buckets of the record store the keeper uses on a shared store (Redis); the embedded
// store's layout is in embedded.go.
const (
	bucketRecords = "responses"       // owner tag/response id -> Encode(record)
	bucketSeq     = "responses_seq"   // owner tag -> counter "n": how many responses it kept
	bucketSlots   = "responses_slots" // owner tag/slot -> response id kept there
)

// No cache polls these buckets (a lookup reads the record it needs), so their writes
// skip the version bump: on Redis that halves the round trips of keeping a response.

// Errors of the keeper's lookups.
var (
	// ErrNotFound: no live record of that id for that owner (never kept, expired,
	// evicted, deleted, or another owner's: the caller cannot tell which).
	ErrNotFound = errors.New("stored: response not found")
	// ErrBrokenChain: the response exists but an earlier turn of its conversation is gone.
	ErrBrokenChain = errors.New("stored: an earlier response of the conversation is gone")
	// ErrExists: a record of that id is kept already; the new one was not written.
	ErrExists = errors.New("stored: a response of that id is kept already")
	// ErrTooLarge: the conversation's records weigh more than the caller allowed.
	ErrTooLarge = errors.New("stored: the conversation is too large")
)

const (
	// maxIDLen bounds a response id taken from a client; longer ones cannot be kept ones.
	maxIDLen = 256
	// maxQueued bounds the records waiting for the background writer; beyond it Keep
	// waits, so a store that cannot keep up slows requests rather than filling memory.
	maxQueued = 20000
	// writeTimeout bounds one batch of the background writer.
	writeTimeout = 30 * time.Second
	// syncTimeout bounds the write of a record before its answer goes out.
	syncTimeout = 5 * time.Second
	// batchWindow is how long the background writer lets jobs gather before it writes
	// them. Every batch pays a fixed price (on bbolt a commit with two syncs to disk, which
	// cost more CPU than writing the segment itself; on Redis round trips) and a batch of
	// many responses pays it once: at 5,000 responses a second this window makes batches of
	// about 500. It is also the longest a record waits in memory before its write starts,
	// which is what a crash can lose (see docs/responses-store.md); reads never wait for it,
	// and neither do Update and Flush.
	batchWindow = 100 * time.Millisecond
	// batchMax ends the window early: a batch this large already pays its fixed price
	// many times over, and a larger one only holds memory longer.
	batchMax = 2048
)

// Options configure a Keeper.
type Options struct {
	TTL         time.Duration    // how long a record lives
	MaxPerOwner int64            // records kept per owner, the oldest evicted first; 0 = no cap
	Now         func() time.Time // the clock expiry is judged by; nil = time.Now
	// WriteBehind hands new records to a background writer that stores them in batches
	// (one transaction, one sync to disk, for all that arrived meanwhile, as one segment:
	// see embedded.go); until written they are served from memory. For a store this
	// process owns alone (the embedded one): its readers all go through this keeper, whose
	// index of the records is rebuilt by Load. With a shared store records are written
	// before Keep returns, one store value each, so another replica finds them at once.
	WriteBehind bool
	// OnError hears about failures of the background writer, which has no caller to
	// return them to.
	OnError func(error)
	// BatchWindow is how long the background writer gathers jobs before a batch; 0 means
	// the default (batchWindow), a negative value none (each batch takes what is queued).
	BatchWindow time.Duration
	// Compaction tunes when WriteBehind's segments are compacted; zero fields are the
	// defaults.
	Compaction Compaction
	// HoldBytes bounds the records held in memory while the store refuses them (see
	// hold.go); 0 means the default (64 MiB).
	HoldBytes int64
	// RetryEvery is how often held records are tried again; 0 means the default (1 s).
	RetryEvery time.Duration
	// Health hears of the outcome of the keeper's writes (nil: no one).
	Health *store.WriteHealth
}

// Keeper keeps, finds and walks records. It is safe for concurrent use, and replicas may
// share one store: ids are scoped per owner, and the cap's bookkeeping rests on store.Incr,
// which hands each replica sequence numbers of its own.
//
// The cap's bookkeeping, and with WriteBehind the records themselves, are written by a
// background writer: a goroutine that runs while there is work and exits when there is none.
type Keeper struct {
	st store.Store
	// ownerTags remembers the tags of teams: there are as many as the config names, and a
	// digest per request is work the request path need not do. Passthrough callers are not
	// remembered: any bearer token makes one, so their number has no bound.
	ownerTags sync.Map
	now       func() time.Time
	behind    bool
	onErr     func(error)
	window    time.Duration
	// compaction is Options.Compaction with its defaults filled in.
	compaction Compaction
	limits     atomic.Pointer[limits]
	kick       chan struct{} // ends the writer's window early: a full batch, or a Flush waiting
	health     *store.WriteHealth
	holdMax    int64
	retryEvery time.Duration
	heldBytes  atomic.Int64 // the bytes of held records (hold.go)
	nShared    atomic.Int64 // len(sharedHeld), read without the lock

	mu      sync.Mutex
	cond    *sync.Cond // signalled when the writer finished a batch or stopped
	jobs    []*job
	running bool // a writer goroutine is at work
	waiting int  // Flush calls waiting: the writer skips its window for them
	// Records the store refused, held for a retry (hold.go).
	held        []*heldBatch           // WriteBehind: batches, oldest first
	sharedHeld  map[string]*heldRecord // shared store: records by key
	sharedQueue []*heldRecord          // the same, oldest first (some gone since)
	retrying    bool                   // the writer waits for the next retry, with nothing else to do
	stopped     bool                   // Stop was called: no more retries

	// The embedded layout's index (WriteBehind only; see embedded.go), under mu.
	entries  map[uint64]*entry // hash of record key -> its versions, queued and written
	seed     maphash.Seed
	queues   map[string]*ownerQueue // owner tag -> its records in the order they were kept
	segs     map[uint64]*segInfo    // segments the index points into
	freed    []uint64               // segments it no longer points into, for the writer to remove
	ordinal  uint64                 // the last ordinal handed out
	seq      uint64                 // the last segment number used (set by the writer, under mu)
	swept    int64                  // when expired records were last dropped (Unix ns)
	evicted  map[string]uint64      // owner tag -> the ordinal up to which its records were evicted
	marks    map[string]uint64      // of those, the ones the writer has yet to store
	compact  []uint64               // segments whose few records are to be moved
	moves    []*job                 // records being moved, for a segment of their own
	moveFill *batchBuf              // the buffer they are encoded into
	low      uint64                 // no segment below this is kept (see oldestSeg)
	fill     *batchBuf              // the batch buffer new records are encoded into
	spare    *batchBuf              // the other one, back from the writer
}

type limits struct {
	ttl time.Duration
	max int64
}

// job is one kept response for the writer. With WriteBehind it is a record (a new one, or
// with update a record's new version) already encoded into a batch buffer, to be written
// with its batch; on a shared store, where Keep wrote the record itself, it is the record's
// place under the cap to take.
type job struct {
	tag, key string
	id       string
	ttl      time.Duration
	max      int64

	// WriteBehind only.
	update  bool
	ordinal uint64
	entry   *entry    // the record's entry in the index
	buf     *batchBuf // the batch buffer its record is encoded in, at [off, off+n)
	off, n  int
	expires int64      // Unix nanoseconds
	done    chan error // told the write's outcome, for a caller that waits for it
}

// NewKeeper returns a keeper over st.
func NewKeeper(st store.Store, o Options) *Keeper {
	// No cache polls these buckets: their writes skip the version bump.
	st.Unversioned(bucketRecords, bucketSeq, bucketSlots, bucketSegments, bucketGone, bucketEvicted)
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.BatchWindow == 0:
		o.BatchWindow = batchWindow
	case o.BatchWindow < 0:
		o.BatchWindow = 0
	}
	if o.Compaction.MinBytes <= 0 {
		o.Compaction.MinBytes = defaultCompactMinBytes
	}
	if o.Compaction.Ratio <= 0 {
		o.Compaction.Ratio = defaultCompactRatio
	}
	if o.HoldBytes <= 0 {
		o.HoldBytes = defaultHoldBytes
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = defaultRetryEvery
	}
	k := &Keeper{st: st, now: o.Now, behind: o.WriteBehind, onErr: o.OnError, window: o.BatchWindow, compaction: o.Compaction,
		kick: make(chan struct{}, 1), health: o.Health, holdMax: o.HoldBytes, retryEvery: o.RetryEvery, sharedHeld: map[string]*heldRecord{},
		entries: map[uint64]*entry{}, seed: maphash.MakeSeed(), evicted: map[string]uint64{}, marks: map[string]uint64{}, queues: map[string]*ownerQueue{}, segs: map[uint64]*segInfo{}}
	k.cond = sync.NewCond(&k.mu)
	k.SetLimits(o.TTL, o.MaxPerOwner)
	return k
}

// SetLimits changes the ttl and cap of records kept from now on (a config reload).
func (k *Keeper) SetLimits(ttl time.Duration, maxPerOwner int64) {
	k.limits.Store(&limits{ttl: ttl, max: maxPerOwner})
}

// ownerTag is how an owner appears in keys: a digest, so team names and passthrough callers'
// key digests never show in the store, and every owner's keys have one length and alphabet.
func (k *Keeper) ownerTag(owner string) string {
	if t, ok := k.ownerTags.Load(owner); ok {
		return t.(string)
	}
	d := sha256.Sum256([]byte("modelgate/responses\x00" + owner))
	t := hex.EncodeToString(d[:16])
	if strings.HasPrefix(owner, "team:") {
		k.ownerTags.Store(owner, t)
	}
	return t
}

func recordKey(tag, id string) string { return tag + "/" + id }

// validID accepts what a platform response id can look like; anything else cannot name a
// kept record, so it is not looked up at all.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// Turn is what a request brings to the record of its response.
type Turn struct {
	Parent string // the previous_response_id it continued; "" for a first turn
	Model  string // the model the client asked for
	Input  []byte // this turn's own input items (TurnInput)
}

// KeepResponse keeps the platform's response object (as it came: its output items stay
// inside it, see Record.OutputItems) as the answer to turn. Neither response nor turn's
// bytes are retained once it returns.
func (k *Keeper) KeepResponse(ctx context.Context, owner string, turn Turn, response []byte) error {
	// The response is not copied: Keep encodes it (or writes it, on a shared store) before
	// it returns. So id and status are read in place, as views of its bytes that live no
	// longer than this call (Keep copies what it keeps of them); two lookups rather than
	// one GetMany, because both keys come first in a response object, so each stops after
	// a few fields where GetMany walks the whole object.
	view := unsafe.String(unsafe.SliceData(response), len(response))
	r := &Record{ID: gjson.Get(view, "id").Str, Parent: turn.Parent, Status: gjson.Get(view, "status").Str,
		Model: turn.Model, Input: turn.Input, Response: response}
	return k.Keep(ctx, owner, r)
}

// Keep keeps a new record for owner. It never replaces one: a repeated id is ErrExists and
// the first record stays. r's bytes are not retained once it returns.
func (k *Keeper) Keep(ctx context.Context, owner string, r *Record) error {
	return k.keep(ctx, owner, r)
}

// KeepDurable keeps r like Keep, and with a write-behind store returns only once r is
// written. A background response's id goes to a client that will poll it, and a reader can
// see a record still waiting for the writer: kept with Keep, a crash in that window would
// turn a job the client saw queued or running into an unknown id.
func (k *Keeper) KeepDurable(ctx context.Context, owner string, r *Record) error {
	done := make(chan error, 1)
	if !k.behind {
		// Written before Keep returns anyway; done only says not to hold it on a failure.
		return k.keepWith(ctx, owner, r, done)
	}
	if err := k.keepWith(ctx, owner, r, done); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k *Keeper) keep(ctx context.Context, owner string, r *Record) error {
	return k.keepWith(ctx, owner, r, nil)
}

// keepWith keeps r; with a write-behind store and done set, the writer starts at once and
// sends the write's outcome on done. On a shared store done set means the same (the write
// is waited for): a record the store refuses is then an error, not held.
func (k *Keeper) keepWith(ctx context.Context, owner string, r *Record, done chan error) error {
	if !validID(r.ID) {
		return fmt.Errorf("stored: response id %q cannot be kept", truncate(r.ID))
	}
	lim := k.limits.Load()
	now := k.now()
	if r.CreatedAt == 0 {
		r.CreatedAt = now.Unix()
	}
	r.ExpiresAt = now.Add(lim.ttl).UnixNano()
	tag := k.ownerTag(owner)
	j := &job{tag: tag, key: recordKey(tag, r.ID), ttl: lim.ttl, max: lim.max}
	if !k.behind {
		if k.heldShared(j.key) != nil {
			return ErrExists
		}
		ctx, cancel := context.WithTimeout(ctx, syncTimeout)
		defer cancel()
		raw := Encode(r)
		created, err := k.st.Create(ctx, bucketRecords, j.key, raw, lim.ttl)
		k.health.Wrote(store.WriterResponses, err)
		if err != nil && done == nil {
			// Held and tried again: its id is in the client's answer (hold.go).
			j.id = r.ID
			return k.holdShared(j, raw, r.ExpiresAt)
		}
		if err != nil {
			return err // KeepDurable's caller tells its client
		}
		if !created {
			return ErrExists
		}
		if j.max > 0 {
			j.id = strings.Clone(r.ID) // r's bytes may be reused once Keep returns
			k.enqueue(j)               // only the cap's bookkeeping is left, and it need not hold anyone up
		}
		return nil
	}
	// No read of the store here: the index in memory knows every record kept.
	k.mu.Lock()
	defer k.mu.Unlock()
	j.done = done
	if err := k.keepBehind(j, r); err != nil || done == nil {
		return err
	}
	k.wake() // the write is waited for: no window
	return nil
}

// Update replaces a kept record of owner (a background response moving on to its next
// status); it keeps the record's place under the cap and its expiry.
func (k *Keeper) Update(ctx context.Context, owner string, r *Record) error {
	return k.updateTag(ctx, k.ownerTag(owner), r)
}

func (k *Keeper) updateTag(ctx context.Context, tag string, r *Record) error {
	old, err := k.get(ctx, tag, r.ID)
	if err != nil {
		return err
	}
	r.CreatedAt, r.ExpiresAt = old.CreatedAt, old.ExpiresAt
	left := time.Duration(r.ExpiresAt - k.now().UnixNano())
	if left <= 0 {
		return ErrNotFound
	}
	key := recordKey(tag, r.ID)
	if k.behind {
		return k.updateBehind(ctx, &job{tag: tag, key: key}, r)
	}
	raw := Encode(r)
	if k.replaceShared(key, raw) {
		return nil // written when the held record is
	}
	return k.st.Put(ctx, bucketRecords, key, raw, left)
}

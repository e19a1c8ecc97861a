package stored

import (
	"bytes"
	"context"
	"errors"
	"hash/maphash"
	"strconv"
	"strings"
	"time"

	"modelgate/store"
)

// The embedded layout (WriteBehind): records live in segments (see segment.go), one store
// value per batch, and an index in memory says where each record is. The store this layout
// is for belongs to this process alone, so the index is the whole truth about which records
// are kept; it is rebuilt from the segments' own indexes when the process starts (Load).
//
// What the index costs: an entry per kept record (its key and place, some 120 bytes), so a
// million kept responses hold about 120 MB. The per-team cap (responses.store_max_per_team)
// bounds it.
//
// This file holds the index and the calls that read and change it; the segments' bookkeeping
// and the writer's side are in embedded_segments.go, the start-up in embedded_load.go.
const (
	bucketSegments = "responses_segments" // segment number (16 hex digits) -> segment
	// bucketGone marks responses a client deleted: owner tag/response id -> nothing, for as
	// long as the record would have lived. Their segments may outlive them (other records
	// share them), and a start-up must not bring them back.
	bucketGone = "responses_gone"
	// bucketEvicted holds, per owner, the ordinal up to which its responses were evicted
	// (owner tag -> decimal ordinal): the cap evicts in ordinal order, so one number says
	// which records a start-up must not bring back, though their segments may still exist.
	bucketEvicted = "responses_evicted"
)

// place is where a written version of a record is.
type place struct {
	seg     uint64
	off, n  int
	expires int64  // Unix nanoseconds
	ordinal uint64 // when it was kept, among all records: its owner's cap evicts in this order
}

// entry is what the keeper knows of one record key: the newest version waiting for the
// writer, if any, and where the written one is, if any. One map of these, and pointers to
// them from the writer's jobs and the owners' queues, keep a record's bookkeeping to a
// couple of map operations.
type entry struct {
	key     string
	ordinal uint64 // when the record was kept (its versions keep it)
	job     *job   // the newest version not yet written; nil when none
	at      place
	written bool   // at is set
	indexed bool   // in the index (not deleted, evicted or expired since)
	next    *entry // another entry of the same key hash
}

// The index is a map from a 64-bit hash of the key, rather than from the key: with a
// record kept and one evicted per response, a string-keyed map of ten thousands of keys
// spent a microsecond per lookup following key pointers through its probe sequence, which
// uint64 keys held in the map's own groups do not. Keys whose hashes collide are chained.

func (k *Keeper) hash(key string) uint64 { return maphash.String(k.seed, key) }

// lookup returns key's entry, or nil. Called with k.mu held.
func (k *Keeper) lookup(key string) *entry { return k.lookupHashed(key, k.hash(key)) }

func (k *Keeper) lookupHashed(key string, h uint64) *entry {
	for e := k.entries[h]; e != nil; e = e.next {
		if e.key == key {
			return e
		}
	}
	return nil
}

// insert adds e, whose key (of hash h) has no entry yet. Called with k.mu held.
func (k *Keeper) insert(e *entry, h uint64) {
	e.next, e.indexed = k.entries[h], true
	k.entries[h] = e
}

// drop removes e from the index. Called with k.mu held.
func (k *Keeper) drop(e *entry) {
	if !e.indexed {
		return
	}
	e.indexed = false
	h := k.hash(e.key)
	if first := k.entries[h]; first == e {
		if e.next == nil {
			delete(k.entries, h)
		} else {
			k.entries[h] = e.next
		}
	} else {
		for p := first; p != nil; p = p.next {
			if p.next == e {
				p.next = e.next
				break
			}
		}
	}
	e.next = nil
}

// live reports whether the entry holds a record that has not expired.
func (e *entry) live(nowNanos int64) bool {
	return e.job != nil || e.written && e.at.expires > nowNanos
}

// ownerQueue is an owner's records in the order they were kept, for the cap and expiry.
// Entries whose record a client deleted stay until they reach the front, and count under the
// cap until then, as on a shared store (whose ring keeps a deleted response's slot).
type ownerQueue struct {
	items []queued
	head  int
}

type queued struct {
	e       *entry
	ordinal uint64 // the version kept then: a record kept again under its id is a new one
}

// current reports whether q still names the record its entry holds.
func (q queued) current() bool {
	return q.e.indexed && q.e.written && q.e.at.ordinal == q.ordinal
}

func (q *ownerQueue) push(e *entry, ordinal uint64) { q.items = append(q.items, queued{e, ordinal}) }

func (q *ownerQueue) len() int64 { return int64(len(q.items) - q.head) }

func (q *ownerQueue) empty() bool { return q.head == len(q.items) }

func (q *ownerQueue) front() queued { return q.items[q.head] }

func (q *ownerQueue) pop() {
	q.items[q.head] = queued{}
	q.head++
	// The consumed front is given back once it is half the slice.
	if q.head >= 64 && q.head*2 >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}

// segKey is a segment's key: fixed-width hex, so the store's byte order is their order.
func segKey(seq uint64) string {
	const digits = "0000000000000000"
	s := strconv.FormatUint(seq, 16)
	return digits[len(s):] + s
}

// tagOf is the owner tag of a record key.
func tagOf(key string) string {
	tag, _, _ := strings.Cut(key, "/")
	return tag
}

// waitForRoom waits while the writer's queue is full. Called with k.mu held.
func (k *Keeper) waitForRoom() {
	for len(k.jobs) >= maxQueued {
		k.cond.Wait()
	}
}

// keepBehind queues a new record for the writer, unless one of its key is kept. Called with
// k.mu held.
func (k *Keeper) keepBehind(j *job, r *Record) error {
	k.waitForRoom()
	h := k.hash(j.key)
	e := k.lookupHashed(j.key, h)
	if e != nil && e.live(k.now().UnixNano()) {
		return ErrExists
	}
	if e == nil {
		e = &entry{key: j.key}
		k.insert(e, h)
	}
	k.ordinal++
	j.ordinal, j.entry = k.ordinal, e
	e.job, e.ordinal = j, j.ordinal
	k.encode(j, r)
	k.enqueueLocked(j)
	return nil
}

// updateBehind writes a new version of a kept record, with the next batch, which it starts
// at once. It waits for the write: a background response's status is what a client polls,
// and one moving on must survive a crash right after (a job found unfinished after a
// restart is marked failed; one whose record was lost is a 404).
func (k *Keeper) updateBehind(ctx context.Context, j *job, r *Record) error {
	k.mu.Lock()
	k.waitForRoom()
	e := k.lookup(j.key)
	if e == nil {
		k.mu.Unlock()
		return ErrNotFound
	}
	// The new version carries the record's ordinal, so that on its own (once the segment
	// of the first version is gone) it still says where the record stands under the cap.
	// The writer clears j.done once it has told it (a held job is retried later), so the
	// wait is on a copy.
	done := make(chan error, 1)
	j.update, j.entry, j.ordinal, j.done = true, e, e.ordinal, done
	e.job = j
	k.encode(j, r)
	k.enqueueLocked(j)
	k.waiting++ // the writer skips its window
	k.wake()
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.waiting--
		k.mu.Unlock()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unindex drops e's record from the index (deleted, evicted or expired). Called with k.mu
// held.
func (k *Keeper) unindex(e *entry) {
	k.drop(e)
	if e.written {
		e.written = false
		k.release(e.at)
	}
}

// sweepEvery is how often the writer drops expired records from the index.
const sweepEvery = time.Minute

// evictOldest pops tag's oldest records while it keeps more than max (max < 0: none
// besides the expired ones, which go whatever max is). Records are kept with one ttl
// at a time, so they expire in the order they were kept; after a reload that shortened the
// ttl, the older records leave at their own expiry, or when their turn comes.
// Called with k.mu held.
func (k *Keeper) evictOldest(tag string, max int64, nowNanos int64) {
	q := k.queues[tag]
	if q == nil {
		return
	}
	for !q.empty() {
		it := q.front()
		current := it.current()
		if current && it.e.at.expires > nowNanos && (max < 0 || q.len() <= max) {
			break
		}
		q.pop()
		if it.ordinal > k.evicted[tag] {
			k.evicted[tag] = it.ordinal
			k.marks[tag] = it.ordinal // written with the next batch
		}
		if current {
			// An update of it still queued is dropped when written: the writer finds the
			// entry gone.
			k.unindex(it.e)
		}
	}
	if q.empty() {
		delete(k.queues, tag)
	}
}

// getBehind returns the newest version of key's record: the one waiting for the writer,
// or the written one, read at its place.
func (k *Keeper) getBehind(ctx context.Context, key string) (*Record, error) {
	nowNanos := k.now().UnixNano()
	k.mu.Lock()
	e := k.lookup(key)
	var raw []byte
	var p place
	live := e != nil && e.live(nowNanos)
	switch {
	case !live:
	case e.job != nil:
		// Its batch buffer is reused once written: the record is copied out.
		j := e.job
		raw = bytes.Clone(j.buf.b[j.off : j.off+j.n])
	default:
		p = e.at
	}
	k.mu.Unlock()
	switch {
	case !live:
		return nil, ErrNotFound
	case raw != nil:
		return Decode(raw)
	}
	b, err := k.st.GetRange(ctx, bucketSegments, segKey(p.seg), p.off, p.n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound // evicted, its segment removed, since the index was read
	}
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// deleteBehind removes key's record from the index and marks it gone in the store.
func (k *Keeper) deleteBehind(ctx context.Context, key string) (bool, error) {
	k.flushIfPending(key)
	nowNanos := k.now().UnixNano()
	k.mu.Lock()
	e := k.lookup(key)
	if e == nil {
		k.mu.Unlock()
		return false, nil
	}
	live, expires := e.live(nowNanos), e.at.expires
	k.unindex(e)
	if len(k.freed) > 0 || len(k.compact) > 0 {
		k.startWriter() // to remove the segment this left empty, or compact it
	}
	k.mu.Unlock()
	if !live {
		return false, nil
	}
	return true, k.st.Put(ctx, bucketGone, key, nil, time.Duration(expires-nowNanos))
}

package stored

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
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

func init() { store.Unversioned(bucketSegments, bucketGone, bucketEvicted) }

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

// segInfo is what the index knows of one segment: how many of its records it points at and
// their bytes. At none the segment is removed from the store; when the few left hold a small
// share of its bytes, they are moved to a new segment (compaction), so that one response
// kept long (a quiet team's) does not pin a whole batch of a busy team's evicted ones.
type segInfo struct {
	live, liveBytes int
	size            int      // the bytes of all its records
	members         []*entry // the entries whose records it got when written
	compacting      bool     // its records are being moved
	// building: its records are still being indexed (a batch just written, or a segment
	// read at start-up). A record replaced meanwhile may be one of its own (kept and
	// updated in one batch), so until it is complete a release only counts.
	building bool
}

// add notes that e's record at p is in the segment.
func (s *segInfo) add(e *entry, p place) {
	s.live++
	s.liveBytes += p.n
	s.size += p.n
	s.members = append(s.members, e)
}

// A segment is compacted once its live records hold less than 1/ratio of its bytes, if it
// is at least minBytes: moving a record costs a copy and a write, worth it only when it
// frees many times that. These are the defaults of Options.Compaction.
const (
	defaultCompactRatio    = 4
	defaultCompactMinBytes = 64 << 10
)

// Compaction tunes when a segment of the embedded store is compacted; a zero field is its
// default. Tests lower the bounds to compact often.
type Compaction struct {
	MinBytes int // a segment smaller than this is left alone
	Ratio    int // compacted once its live records hold less than 1/Ratio of its bytes
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

// batchBuf holds a batch's records, encoded as Keep gets them, in the layout of a segment
// (segment.go); the writer adds the index and writes it. Two take turns, one filling while
// the other is written, so in a steady flow keeping a response allocates no copy of it.
type batchBuf struct{ b []byte }

// maxSpareBatch is the largest buffer kept for reuse; a rare huge batch does not pin its
// memory.
const maxSpareBatch = 16 << 20

// encode appends r to the filling batch buffer and notes where in j. Called with k.mu
// held, after the wait for room in the queue.
func (k *Keeper) encode(j *job, r *Record) {
	b := k.filling()
	j.buf, j.off = b, len(b.b)
	b.b = appendRecord(b.b, r)
	j.n = len(b.b) - j.off
	j.expires = r.ExpiresAt
}

// encodeMove is encode for a record already encoded, moved by compaction: into the moves'
// own buffer. Called with k.mu held.
func (k *Keeper) encodeMove(j *job, raw []byte, expires int64) {
	if k.moveFill == nil {
		k.moveFill = &batchBuf{b: []byte(segmentMagic)}
	}
	b := k.moveFill
	j.buf, j.off = b, len(b.b)
	b.b = append(b.b, raw...)
	j.n, j.expires = len(raw), expires
}

// filling is the batch buffer new records go into, begun if need be. Called with k.mu held.
func (k *Keeper) filling() *batchBuf {
	if k.fill == nil {
		k.fill, k.spare = k.spare, nil
		if k.fill == nil {
			k.fill = &batchBuf{}
		}
		k.fill.b = append(k.fill.b[:0], segmentMagic...)
	}
	return k.fill
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
	j.update, j.entry, j.ordinal, j.done = true, e, e.ordinal, make(chan error, 1)
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
	case err := <-j.done:
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

// release is told that the index no longer points at p. Called with k.mu held.
func (k *Keeper) release(p place) {
	s := k.segs[p.seg]
	if s == nil {
		return
	}
	s.live--
	s.liveBytes -= p.n
	switch {
	case s.building:
	case s.live <= 0:
		k.free(p.seg)
	case !s.compacting && s.size >= k.compaction.MinBytes && s.liveBytes*k.compaction.Ratio < s.size && p.seg != k.oldestSeg():
		// Not the oldest segment: with responses evicted oldest first, that is the one
		// being emptied by the caps right now, and what is left in it goes next.
		s.compacting = true
		k.compact = append(k.compact, p.seg)
	}
}

// built ends the building of segment seq, registered as s: one the index points into none
// of the records of is removed. Called with k.mu held.
func (k *Keeper) built(seq uint64, s *segInfo) {
	s.building = false
	if s.live <= 0 {
		k.free(seq)
	}
}

// free drops segment seq from the index and has the writer remove it. Called with k.mu held.
func (k *Keeper) free(seq uint64) {
	delete(k.segs, seq)
	k.freed = append(k.freed, seq)
}

// oldestSeg is the lowest-numbered segment the index points into (0 if none). Segments are
// numbered as they are written and never come back once gone, so the search resumes where
// it last stopped. Called with k.mu held.
func (k *Keeper) oldestSeg() uint64 {
	for ; k.low <= k.seq; k.low++ {
		if _, ok := k.segs[k.low]; ok {
			return k.low
		}
	}
	return 0
}

// compactSegments moves the records still kept in each of seqs into a segment of moves, as
// new versions of themselves (entryUpdate, ordinal and expiry unchanged), after which
// nothing points into those segments and they are removed. Moves get a segment of their
// own, apart from new responses: records that outlived their batch tend to live on, while
// most new ones leave soon, so mixed in with those they would be moved again and again.
// Run by the writer.
func (k *Keeper) compactSegments(seqs []uint64) {
	type move struct {
		e *entry
		p place
	}
	for _, seq := range seqs {
		k.mu.Lock()
		var moves []move
		if s := k.segs[seq]; s != nil {
			for _, e := range s.members {
				// A record with a newer version queued moves with that.
				if e.indexed && e.written && e.job == nil && e.at.seg == seq {
					moves = append(moves, move{e, e.at})
				}
			}
		}
		k.mu.Unlock()
		if len(moves) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		blob, err := k.st.Get(ctx, bucketSegments, segKey(seq))
		cancel()
		if err != nil {
			if k.onErr != nil {
				k.onErr(fmt.Errorf("stored: compacting segment %s: %w", segKey(seq), err))
			}
			continue
		}
		k.mu.Lock()
		for _, m := range moves {
			if !m.e.indexed || m.e.job != nil || m.e.at != m.p || m.p.off+m.p.n > len(blob) {
				continue // changed meanwhile
			}
			j := &job{tag: tagOf(m.e.key), key: m.e.key, update: true, ordinal: m.e.ordinal, entry: m.e}
			k.encodeMove(j, blob[m.p.off:m.p.off+m.p.n], m.p.expires)
			m.e.job = j
			k.moves = append(k.moves, j)
		}
		k.mu.Unlock()
	}
}

// writeSegment writes one batch of jobs, whose records are in buf, as a segment (and removes
// the segments nothing points at any more, in the same transaction), then puts the records
// in the index.
func (k *Keeper) writeSegment(jobs []*job, buf *batchBuf, freed []uint64, marks map[string]uint64) error {
	var seq uint64
	var entries []segEntry
	var blob []byte
	var ttl time.Duration
	if len(jobs) > 0 {
		k.mu.Lock() // k.seq is read under it (oldestSeg)
		k.seq++
		seq = k.seq
		k.mu.Unlock()
		entries = make([]segEntry, len(jobs))
		var last int64
		for i, j := range jobs {
			kind := entryNew
			if j.update {
				kind = entryUpdate
			}
			entries[i] = segEntry{kind: kind, key: j.key, ordinal: j.ordinal, expires: j.expires, off: j.off, n: j.n}
			last = max(last, j.expires)
		}
		// Into a slice of its own: readers copying a pending record read buf.b meanwhile
		// (under k.mu), and the index lands past every record they can read.
		blob = appendSegmentIndex(buf.b, entries)
		// The segment lives as long as its longest-lived record; records leave it earlier
		// through the index, and a segment none is left in is removed.
		ttl = max(time.Duration(last-k.now().UnixNano()), time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	err := k.st.Batch(ctx, func(tx store.Tx) error {
		for _, s := range freed {
			if err := tx.Remove(bucketSegments, segKey(s)); err != nil {
				return err
			}
		}
		for tag, ordinal := range marks {
			if err := tx.Put(bucketEvicted, tag, []byte(strconv.FormatUint(ordinal, 10)), 0); err != nil {
				return err
			}
		}
		if len(jobs) == 0 {
			return nil
		}
		return tx.Put(bucketSegments, segKey(seq), blob, ttl)
	})
	cancel()

	k.mu.Lock()
	defer k.mu.Unlock()
	if blob != nil {
		buf.b = blob // its capacity is kept for the next batch
	}
	if err != nil {
		// Tried again with the next batch.
		k.freed = append(k.freed, freed...)
		for tag, ordinal := range marks {
			if ordinal > k.marks[tag] {
				k.marks[tag] = ordinal
			}
		}
	}
	nowNanos := k.now().UnixNano()
	seg := &segInfo{building: true}
	if seq != 0 && err == nil {
		k.segs[seq] = seg
	}
	capped := map[string]int64{}
	for _, j := range jobs {
		e := j.entry
		if e.job == j {
			e.job = nil
		}
		attached := e.indexed // not deleted or evicted meanwhile
		switch {
		case err != nil || !attached:
			// Not written (the records are lost, and the caller hears of it), or an update
			// of a record gone since, which brings nothing back.
			if attached && !e.written && e.job == nil {
				k.drop(e)
			}
			continue
		case j.update && !e.written:
			continue // the record it updates was never written
		}
		// An update carries the record's ordinal (updateBehind, compactSegments).
		p := place{seg: seq, off: j.off, n: j.n, expires: j.expires, ordinal: j.ordinal}
		if e.written {
			// The version it replaces, or an expired record of the same id; it may be in this
			// very segment (kept and updated within one batch).
			k.release(e.at)
		}
		e.at, e.written = p, true
		seg.add(e, p)
		if j.update {
			continue
		}
		q := k.queues[j.tag]
		if q == nil {
			q = &ownerQueue{}
			k.queues[j.tag] = q
		}
		q.push(e, j.ordinal)
		if j.max > 0 {
			capped[j.tag] = j.max // the newest limits rule the batch
		}
	}
	if seq != 0 && err == nil {
		k.built(seq, seg) // removed again when every entry was an update of a record gone since
	}
	// In a fixed order: which segment is the oldest changes as evictions free segments, and
	// compaction skips the oldest, so the order of owners can decide what gets compacted;
	// map order would let the same batches compact differently from run to run.
	for _, tag := range slices.Sorted(maps.Keys(capped)) {
		k.evictOldest(tag, capped[tag], nowNanos)
	}
	for _, j := range jobs {
		if j.done != nil {
			j.done <- err
		}
	}
	if time.Duration(nowNanos-k.swept) >= sweepEvery {
		k.swept = nowNanos
		for tag := range k.queues {
			k.evictOldest(tag, -1, nowNanos)
		}
	}
	return err
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

// Load rebuilds the index from the segments in the store, at start-up, before any other
// call. The cap is applied as configured now. Records of the layout before segments (one
// store value per record) are moved into segments. Without WriteBehind it does nothing.
func (k *Keeper) Load(ctx context.Context) error {
	if !k.behind {
		return nil
	}
	nowNanos := k.now().UnixNano()
	gone := map[string]bool{}
	if err := k.st.Scan(ctx, bucketGone, "", func(key string, _ []byte) error {
		gone[key] = true
		return nil
	}); err != nil {
		return err
	}
	evicted := map[string]uint64{}
	if err := k.st.Scan(ctx, bucketEvicted, "", func(tag string, v []byte) error {
		if n, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			evicted[tag] = n
		}
		return nil
	}); err != nil {
		return err
	}
	type segment struct {
		seq     uint64
		entries []segEntry
	}
	var segs []segment
	var corrupt []string
	err := k.st.Scan(ctx, bucketSegments, "", func(key string, value []byte) error {
		seq, err := strconv.ParseUint(key, 16, 64)
		entries, derr := decodeSegment(value)
		if err != nil || derr != nil {
			corrupt = append(corrupt, key)
			return nil
		}
		segs = append(segs, segment{seq, entries})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmp.Compare(a.seq, b.seq) })

	k.mu.Lock()
	k.evicted = evicted
	for _, s := range segs {
		k.seq = max(k.seq, s.seq)
		info := &segInfo{building: true}
		k.segs[s.seq] = info
		for _, se := range s.entries {
			k.ordinal = max(k.ordinal, se.ordinal)
			if gone[se.key] || se.expires <= nowNanos || se.ordinal <= evicted[tagOf(se.key)] {
				continue
			}
			p := place{seg: s.seq, off: se.off, n: se.n, expires: se.expires, ordinal: se.ordinal}
			// A new version (entryUpdate) stands on its own: the segment of the record's first
			// version is removed once nothing in it is kept, and the new version carries the
			// record's ordinal, so the eviction mark and the cap below still place it.
			e := k.lookup(se.key)
			switch {
			case e != nil:
				// An older version, or an expired record of the same id, maybe in this segment.
				k.release(e.at)
			default:
				e = &entry{key: se.key}
				k.insert(e, k.hash(se.key))
			}
			e.at, e.written, e.ordinal = p, true, se.ordinal
			info.add(e, p)
		}
		k.built(s.seq, info)
	}
	// Each owner's queue, in the order its records were kept.
	for _, e := range k.entries {
		for ; e != nil; e = e.next {
			tag := tagOf(e.key)
			q := k.queues[tag]
			if q == nil {
				q = &ownerQueue{}
				k.queues[tag] = q
			}
			q.push(e, e.at.ordinal)
		}
	}
	limit := k.limits.Load().max
	if limit <= 0 {
		limit = -1 // no cap: only the expired go
	}
	for tag, q := range k.queues {
		slices.SortFunc(q.items, func(a, b queued) int { return cmp.Compare(a.ordinal, b.ordinal) })
		k.evictOldest(tag, limit, nowNanos)
	}
	k.swept = nowNanos
	if len(k.freed) > 0 || len(k.marks) > 0 || len(k.compact) > 0 {
		k.startWriter() // to remove the segments no record is left in, note evictions, compact
	}
	k.mu.Unlock()
	if len(corrupt) > 0 && k.onErr != nil {
		k.onErr(fmt.Errorf("stored: %d unreadable segments skipped (%s...)", len(corrupt), corrupt[0]))
	}
	return k.migrate(ctx)
}

// migrate moves records kept one per store value (the layout before segments) into
// segments, oldest first, and removes the old layout's values.
func (k *Keeper) migrate(ctx context.Context) error {
	type old struct {
		tag string
		rec *Record
	}
	var olds []old
	var keys []string
	err := k.st.Scan(ctx, bucketRecords, "", func(key string, value []byte) error {
		keys = append(keys, key)
		if r, err := Decode(value); err == nil && r.ExpiresAt > k.now().UnixNano() {
			olds = append(olds, old{tagOf(key), r})
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	slices.SortStableFunc(olds, func(a, b old) int { return cmp.Compare(a.rec.CreatedAt, b.rec.CreatedAt) })
	lim := k.limits.Load()
	for _, o := range olds {
		k.mu.Lock()
		// A record of the same id in a segment already stays (ErrExists).
		_ = k.keepBehind(&job{tag: o.tag, key: recordKey(o.tag, o.rec.ID), max: lim.max}, o.rec)
		k.mu.Unlock()
	}
	k.Flush()
	var slots, seqs []string
	if err := k.st.Scan(ctx, bucketSlots, "", func(key string, _ []byte) error {
		slots = append(slots, key)
		return nil
	}); err != nil {
		return err
	}
	if err := k.st.ScanCounters(ctx, bucketSeq, "", func(key string, _ map[string]int64) error {
		seqs = append(seqs, key)
		return nil
	}); err != nil {
		return err
	}
	return k.st.Batch(ctx, func(tx store.Tx) error {
		for _, b := range []struct {
			name string
			keys []string
		}{{bucketRecords, keys}, {bucketSlots, slots}, {bucketSeq, seqs}} {
			for _, key := range b.keys {
				if err := tx.Remove(b.name, key); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

package stored

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"modelgate/store"
)

// Segment bookkeeping of the embedded layout: how many of each segment's records the index
// still points at, the batch buffers records are encoded into, and the writer's side that
// writes a batch as a segment and compacts segments the caps have mostly emptied. Apart from
// embedded.go (the index and the calls that use it) because it changes with the segment
// format, not with the keeper's API.

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

// bytesOrNil is b's bytes; nil for no buffer.
func (b *batchBuf) bytesOrNil() []byte {
	if b == nil {
		return nil
	}
	return b.b
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

// onFail says what writeSegment does with a batch the store refused.
type onFail int

const (
	failDrop onFail = iota // forget it: moves of records still written where they were
	failHold               // hold it for a retry (hold.go): new records and updates
	failKeep               // leave it where it is held: a retry of a held batch
)

// writeSegment writes one batch of jobs, whose records are in buf, as a segment (and removes
// the segments nothing points at any more, in the same transaction), then puts the records
// in the index. A batch the store refuses is dealt with as fail says.
func (k *Keeper) writeSegment(jobs []*job, buf *batchBuf, freed []uint64, marks map[string]uint64, fail onFail) error {
	var seq uint64
	var entries []segEntry
	var blob []byte
	var ttl time.Duration
	records := len(buf.bytesOrNil())
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
	if len(jobs) > 0 && fail != failDrop {
		k.health.Wrote(store.WriterResponses, err)
	}

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
		if fail != failDrop && blob != nil {
			buf.b = blob[:records] // the index is added again by the retry
		}
		switch fail {
		case failHold:
			k.holdLocked(jobs, buf, err)
			return err
		case failKeep:
			return err
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
			// A move not written (the record stays where it was), or an update of a
			// record gone since, which brings nothing back.
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
			j.done = nil
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

package stored

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"modelgate/store"
)

// Start-up of the embedded layout: the index is rebuilt from the segments, and records of the
// layout before segments are moved into them. Apart from embedded.go because it runs once,
// before any other call, and reads the store in ways nothing else does.

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

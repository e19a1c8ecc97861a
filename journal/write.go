package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// writer is the segment being appended to and the entries open in the journal. It is the
// Journal's, under its mutex (and recover's, before the journal is shared).
//
// The segment is allocated whole when it is started and mapped into memory (mapSegment):
// appending a record is a copy into the mapping, which is the file's page cache, so a record
// copied is in the file for any later reader and outlives the process, without a write(2)
// per record. A syscall per admitted call, or a hand-off to a writing goroutine and back,
// cost each call more than everything else the journal does.
type writer struct {
	f   *os.File
	seg segment // the mapping: its length is the segment's capacity
	num uint64  // the segment's number
	// size is the bytes of records in the segment; after them the file is zeros, which a
	// reader takes for the end.
	size int64
	// base is the bytes a rotation started it with (the entries then open): the segment has
	// room for as many again at least, so that a large open set is not written again at
	// every admission.
	base int64
	// open is every entry admitted and not cleared, by id, its record as written (a slice of
	// the mapping, or of memory for entries read back at start): what a rotation writes
	// again. It holds the calls in flight and those settled less than clearDelay ago (a few
	// hundred bytes each).
	open map[uint64][]byte
	// broken is set when an append failed (a test's hook, standing for a write that failed
	// part way): the segment may end in a partial record, after which nothing could be read
	// back, so the next append starts a new segment first.
	broken bool
}

// recover replays the segments in dir, keeps what they left open as the leftover, and carries
// it into a new segment, removing the old ones: a torn record at the end of the last segment
// is left behind rather than followed by new records that could never be read.
func (j *Journal) recover() error {
	rp, names, nums, err := readDir(j.dir)
	if err != nil {
		return err
	}
	for _, t := range rp.torn {
		j.log.Warn("journal segment ends in a torn or damaged record (a kill mid-write); the rest of it is ignored",
			slog.String("file", t.file), slog.Int64("offset", t.offset), slog.Int64("ignored_bytes", t.ignored))
	}
	left, bad := rp.leftovers()
	for _, err := range bad {
		j.log.Warn("journal entry unreadable; dropped", slog.String("error", err.Error()))
	}
	j.left = left
	j.seq.Store(rp.maxID)
	j.w.open = rp.open
	var last uint64
	if len(nums) > 0 {
		last = nums[len(nums)-1]
	}
	j.w.num = last
	if err := j.rotate(0); err != nil {
		return err
	}
	// Temporary files a rotation left behind (killed before its rename).
	if tmps, err := filepath.Glob(filepath.Join(j.dir, segmentPrefix+"*"+segmentSuffix+tempSuffix)); err == nil {
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(j.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("journal: %w", err)
		}
	}
	return nil
}

// appendAdmitted adds the admission rec of entry id to the segment; j.mu is held. The entry
// is open from here even when the append fails: a record whose write failed part way may be
// read back, so it is carried into the next segment and cleared like any other.
func (j *Journal) appendAdmitted(id uint64, rec []byte) error {
	w := &j.w
	err := j.room(len(rec))
	if err == nil {
		err = j.hook()
	}
	if err != nil {
		w.broken = true
		w.open[id] = rec
		return err
	}
	at, err := w.put(rec)
	if err != nil {
		w.broken = true
		w.open[id] = rec
		return err
	}
	w.open[id] = at
	return nil
}

// appendClears adds the clear records of ids still open; j.mu is held.
func (j *Journal) appendClears(ids []uint64) error {
	var rec [recordHeader + payloadMin]byte
	var err error
	for _, id := range ids {
		if _, ok := j.w.open[id]; !ok {
			continue
		}
		delete(j.w.open, id)
		if err != nil {
			continue // dropped: the next segment, started from the open set, has no need of it
		}
		if err = j.room(len(rec)); err == nil {
			err = j.hook()
		}
		if err != nil {
			j.w.broken = true
			continue
		}
		if _, err = j.w.put(appendClear(rec[:0], id)); err != nil {
			j.w.broken = true
		}
	}
	return err
}

// hook runs the tests' stand-in for a failing write, if any.
func (j *Journal) hook() error {
	if h := j.opts.beforeWrite; h != nil {
		return h()
	}
	return nil
}

// room makes sure the segment has n bytes free, starting the next one when it has not (or
// when the last append failed).
func (j *Journal) room(n int) error {
	w := &j.w
	if !w.broken && w.size+int64(n) <= int64(len(w.seg.data)) {
		return nil
	}
	return j.rotate(n)
}

// put appends rec at the end of the segment, which has room, and returns where it now lies.
func (w *writer) put(rec []byte) ([]byte, error) {
	at := w.size
	copy(w.seg.data[at:], rec)
	w.size += int64(len(rec))
	return w.seg.data[at:w.size:w.size], w.seg.sync(at, int64(len(rec)))
}

// rotate starts the next segment with the entries open and room for need bytes more, then
// removes the current one. The new segment is written whole under a temporary name and
// renamed, so a kill at any point leaves either the old segment or the new one whole (or
// both: replaying both in order gives the same open set).
func (j *Journal) rotate(need int) error {
	w := &j.w
	var openBytes int64
	for _, rec := range w.open {
		openBytes += int64(len(rec))
	}
	capacity := max(j.opts.segmentBytes, 2*openBytes, openBytes+int64(need))
	capacity = (capacity + pageBytes - 1) / pageBytes * pageBytes
	next := w.num + 1
	path := filepath.Join(j.dir, segmentName(next))
	tmp := path + tempSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	seg, err := mapSegment(f, capacity)
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("journal: %w", err)
	}
	nw := writer{f: f, seg: seg, num: next, open: make(map[uint64][]byte, len(w.open))}
	for id, rec := range w.open {
		at, err := nw.put(rec)
		if err != nil {
			return j.dropSegment(&nw, tmp, err)
		}
		nw.open[id] = at
	}
	nw.base = nw.size
	if err := os.Rename(tmp, path); err != nil {
		return j.dropSegment(&nw, tmp, err)
	}
	old := *w
	*w = nw
	if old.f != nil {
		old.close(false)
		if err := os.Remove(filepath.Join(j.dir, segmentName(old.num))); err != nil && !errors.Is(err, os.ErrNotExist) {
			j.warn("journal: old segment not removed", err)
		}
	}
	return nil
}

// dropSegment gives up a segment a rotation could not finish; the current one stays.
func (j *Journal) dropSegment(nw *writer, tmp string, err error) error {
	nw.close(false)
	os.Remove(tmp)
	return fmt.Errorf("journal: %w", err)
}

// pageBytes rounds a segment's capacity: mappings are made of whole pages.
const pageBytes = 4096

// close unmaps the segment and closes it; with trim the file is cut to its records, so that
// the zeros after them take no room while the replica is down. Its records stay for the
// next start.
func (w *writer) close(trim bool) {
	if w.f == nil {
		return
	}
	if trim {
		_ = w.f.Truncate(w.size)
	}
	w.seg.unmap()
	w.f.Close()
	w.f = nil
}

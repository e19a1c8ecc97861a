package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// writer is the segment being appended to and the entries open in the journal. Only the
// writer goroutine touches it (and recover, before that goroutine starts).
type writer struct {
	f    *os.File
	num  uint64 // the segment's number
	size int64  // bytes in it
	// base is the bytes a rotation started it with (the entries then open): the next
	// rotation waits for as many bytes again at least, so that a large open set is not
	// written again at every batch.
	base int64
	// open is every entry admitted and not cleared, by id, its record as written: what a
	// rotation writes again. It holds the calls in flight and those settled less than
	// clearDelay ago (a few hundred bytes each).
	open map[uint64][]byte
	// broken is set when a write failed: the segment may end in a partial record, after
	// which nothing could be read back, so the next batch starts a new segment first.
	broken bool
	buf    []byte // the batch being written, reused
}

// maxKeptBuf keeps a batch buffer grown by a large rotation from staying with the writer.
const maxKeptBuf = 1 << 20

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
	if err := j.rotate(); err != nil {
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

// writeDue appends the admissions, forgets and clears due (all of them with all: the
// process is stopping with every settlement flushed, Close running after the stores' last
// flush) with one write. An admission's record goes before any clear of it: a clear is only
// taken once its Admit returned or gave up, and the lists are taken together.
func (j *Journal) writeDue(all bool) {
	due := j.opts.now().Add(-clearDelay)
	j.mu.Lock()
	admits, forgets, flushes := j.admits, j.forgets, j.flushes
	j.admits, j.forgets, j.flushes = nil, nil, nil
	n := 0
	for n < len(j.clears) && (all || !j.clears[n].at.After(due) || len(j.clears)-n > maxHeldClears) {
		n++
	}
	clears := j.clears[:n:n]
	j.clears = j.clears[n:]
	if len(j.clears) == 0 {
		j.clears = nil // let the array go
	}
	j.mu.Unlock()
	if len(admits) == 0 && len(clears) == 0 && len(forgets) == 0 {
		for _, ch := range flushes {
			ch <- nil
		}
		return
	}
	w := &j.w
	var err error
	if w.broken {
		err = j.rotate()
	}
	b := w.buf[:0]
	for _, p := range admits {
		b = append(b, p.rec...)
		w.open[p.id] = p.rec
	}
	nclear := 0
	clearOne := func(id uint64) {
		if _, ok := w.open[id]; !ok {
			return
		}
		delete(w.open, id)
		b = appendClear(b, id)
		nclear++
	}
	for _, c := range clears {
		clearOne(c.id)
	}
	for _, id := range forgets {
		clearOne(id)
	}
	if err == nil {
		err = j.append(b)
	}
	w.buf = b[:0]
	if cap(w.buf) > maxKeptBuf {
		w.buf = nil
	}
	for _, p := range admits {
		p.done <- err
	}
	for _, ch := range flushes {
		ch <- err
	}
	if err != nil {
		// The records may be partly written; the next batch starts a new segment from the
		// entries open in memory, which carries the admissions, and drops the clears, of
		// this one. Until then an entry cleared here is charged by a start in between, above
		// the bill rather than below it.
		w.broken = true
		j.warn("journal write failed", err, len(admits), nclear)
		return
	}
	if w.size >= max(j.opts.segmentBytes, 2*w.base) {
		if err := j.rotate(); err != nil {
			j.warn("journal rotation failed", err, 0, 0)
		}
	}
}

// append writes b at the end of the segment, in one write(2) (O_APPEND).
func (j *Journal) append(b []byte) error {
	if hook := j.opts.beforeWrite; hook != nil {
		if err := hook(); err != nil {
			return err
		}
	}
	n, err := j.w.f.Write(b)
	j.w.size += int64(n)
	return err
}

// rotate starts the next segment with the entries open, then removes the current one. The
// new segment is written whole under a temporary name and renamed, so a kill at any point
// leaves either the old segment or the new one whole (or both: replaying both in order gives
// the same open set).
func (j *Journal) rotate() error {
	w := &j.w
	next := w.num + 1
	path := filepath.Join(j.dir, segmentName(next))
	tmp := path + tempSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	// Written in chunks of the batch buffer's bound: an open set swollen by the settled
	// calls of the last clearDelay at a high rate takes no second copy of itself in memory.
	// The file is not renamed in until it is whole, so the writes need not be one.
	b := w.buf[:0]
	var size int64
	for _, rec := range w.open {
		b = append(b, rec...)
		if len(b) >= maxKeptBuf && err == nil {
			_, err = f.Write(b)
			size += int64(len(b))
			b = b[:0]
		}
	}
	if err == nil {
		_, err = f.Write(b)
		size += int64(len(b))
	}
	w.buf = b[:0]
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("journal: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("journal: %w", err)
	}
	if w.f != nil {
		w.f.Close()
		if err := os.Remove(filepath.Join(j.dir, segmentName(w.num))); err != nil && !errors.Is(err, os.ErrNotExist) {
			j.warn("journal: old segment not removed", err, 0, 0)
		}
	}
	w.f, w.num, w.size, w.base, w.broken = f, next, size, size, false
	return nil
}

// close closes the segment; its records stay for the next start.
func (w *writer) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

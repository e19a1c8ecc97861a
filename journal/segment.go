package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A segment is a file of records, each
//
//	length uint32 LE | crc32c(payload) uint32 LE | payload
//
// where the payload is a kind byte, the entry's id (uint64 LE) and, for an admission, the
// entry as JSON. A segment is allocated whole and its records are followed by zeros: a
// header of zeros ends it. A kill mid-copy leaves at most the last record partial; the
// checksum tells a torn or damaged record from a whole one, and reading stops there.
const (
	recordHeader = 8
	kindAdmit    = 'A'
	kindClear    = 'C'
	// payloadMin is a payload's kind and id: all a clear holds.
	payloadMin = 1 + 8
	// maxPayload bounds what a reader takes for one record's length: an entry is a few
	// hundred bytes; a larger length is a damaged header, not a record.
	maxPayload = payloadMin + maxEntryBytes
)

// checksum is a record payload's CRC-32C (hardware assisted on amd64 and arm64; MakeTable
// builds the table once and returns it after).
func checksum(p []byte) uint32 { return crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) }

// appendAdmit appends the admission record of entry id.
func appendAdmit(b []byte, id uint64, e *Entry) []byte {
	start := len(b)
	b = append(b, make([]byte, recordHeader)...)
	b = append(b, kindAdmit)
	b = binary.LittleEndian.AppendUint64(b, id)
	b = e.appendJSON(b)
	return sealRecord(b, start)
}

// appendClear appends the record that clears entry id.
func appendClear(b []byte, id uint64) []byte {
	start := len(b)
	b = append(b, make([]byte, recordHeader)...)
	b = append(b, kindClear)
	b = binary.LittleEndian.AppendUint64(b, id)
	return sealRecord(b, start)
}

// sealRecord fills in the header of the record that starts at b[start:].
func sealRecord(b []byte, start int) []byte {
	payload := b[start+recordHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], checksum(payload))
	return b
}

// errTorn is a record that is not whole: cut short by a kill mid-write, or damaged.
var errTorn = errors.New("journal: torn or damaged record")

// readRecord reads one record from r. It returns io.EOF at a clean end, errTorn (or an
// error of r) otherwise. body is the admission's JSON, or empty for a clear; it is only valid
// until the next call (buf is reused).
func readRecord(r *bufio.Reader, buf []byte) (kind byte, id uint64, body, next []byte, err error) {
	var h [recordHeader]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.EOF && n == 0 {
			return 0, 0, nil, buf, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			err = errTorn
		}
		return 0, 0, nil, buf, err
	}
	size := binary.LittleEndian.Uint32(h[:4])
	if size == 0 && binary.LittleEndian.Uint32(h[4:]) == 0 {
		// The zeros after a segment's records: it was allocated whole (write.go), and a
		// record's length is never 0.
		return 0, 0, nil, buf, io.EOF
	}
	if size < payloadMin || size > maxPayload {
		return 0, 0, nil, buf, errTorn
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	p := buf[:size]
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = errTorn
		}
		return 0, 0, nil, buf, err
	}
	if checksum(p) != binary.LittleEndian.Uint32(h[4:]) {
		return 0, 0, nil, buf, errTorn
	}
	kind, id, body = p[0], binary.LittleEndian.Uint64(p[1:9]), p[9:]
	switch {
	case kind == kindAdmit && len(body) > 0, kind == kindClear && len(body) == 0:
		return kind, id, body, buf, nil
	}
	return 0, 0, nil, buf, errTorn
}

// replay is what a set of segments holds: the records of the admissions no clear followed
// (by id, the record as written), the largest id seen, and where reading stopped early.
type replay struct {
	open  map[uint64][]byte
	maxID uint64
	torn  []tornAt
}

// tornAt is a segment whose records stop before its end.
type tornAt struct {
	file    string
	offset  int64 // bytes read whole
	ignored int64 // bytes after them, not read
}

// replaySegment adds the records of r (a segment of size bytes) to rp. A torn or damaged
// record ends the segment: what follows cannot be framed again.
func (rp *replay) replaySegment(name string, r io.Reader, size int64) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	var off int64
	for {
		kind, id, body, next, err := readRecord(br, buf)
		buf = next
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, errTorn) {
			rp.torn = append(rp.torn, tornAt{file: name, offset: off, ignored: max(size-off, 0)})
			return nil
		}
		if err != nil {
			return fmt.Errorf("journal: %s: %w", name, err)
		}
		rp.maxID = max(rp.maxID, id)
		if kind == kindClear {
			delete(rp.open, id)
		} else {
			rec := appendRecordOf(kind, id, body)
			rp.open[id] = rec
		}
		off += recordHeader + payloadMin + int64(len(body))
	}
}

// appendRecordOf writes a read admission again, whole, for the segment that carries it on.
func appendRecordOf(kind byte, id uint64, body []byte) []byte {
	b := make([]byte, recordHeader, recordHeader+payloadMin+len(body))
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint64(b, id)
	b = append(b, body...)
	return sealRecord(b, 0)
}

// segmentPrefix and segmentSuffix frame a segment's name: journal-<number, 16 hex>.log, the
// numbers growing, so that names sort in the order segments were started.
const (
	segmentPrefix = "journal-"
	segmentSuffix = ".log"
	// tempSuffix marks a segment being written by a rotation; one left by a kill is removed.
	tempSuffix = ".tmp"
)

func segmentName(n uint64) string {
	return fmt.Sprintf("%s%016x%s", segmentPrefix, n, segmentSuffix)
}

// segments lists the segments in dir, oldest first, and the numbers they carry.
func segments(dir string) ([]string, []uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	var names []string
	var nums []uint64
	for _, e := range ents {
		name := e.Name()
		hex, ok := strings.CutPrefix(name, segmentPrefix)
		hex, ok2 := strings.CutSuffix(hex, segmentSuffix)
		if !ok || !ok2 || len(hex) != 16 || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			continue
		}
		names = append(names, name)
		nums = append(nums, n)
	}
	// Fixed-width hex sorts as its number; os.ReadDir already sorts by name.
	if !slices.IsSorted(names) {
		return nil, nil, errors.New("journal: segment names out of order")
	}
	return names, nums, nil
}

// readDir replays every segment in dir, oldest first.
func readDir(dir string) (*replay, []string, []uint64, error) {
	names, nums, err := segments(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	rp := &replay{open: map[uint64][]byte{}}
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated away while listed (ReadDir on a running journal)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("journal: %w", err)
		}
		var size int64
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		err = rp.replaySegment(name, f, size)
		f.Close()
		if err != nil {
			return nil, nil, nil, err
		}
	}
	return rp, names, nums, nil
}

// leftovers decodes the open records of rp, in the order they were admitted. An entry whose
// record is whole but whose JSON Decode refuses is returned with its id alone (Entry zero).
func (rp *replay) leftovers() (out []Left, bad []error) {
	for id, rec := range rp.open {
		e, err := Decode(rec[recordHeader+payloadMin:])
		if err != nil {
			bad = append(bad, fmt.Errorf("entry %d: %w", id, err))
			e = Entry{}
		}
		out = append(out, Left{ID: id, Entry: e})
	}
	slices.SortFunc(out, func(a, b Left) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, bad
}

// ReadDir returns the entries open in the journal in dir as a start would find them, without
// taking the journal's lock or changing a file: for tests and tools. On a running journal it
// sees the batches written so far; a rotation between its listing and its reads may hide
// entries.
func ReadDir(dir string) ([]Left, error) {
	rp, _, _, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	left, _ := rp.leftovers()
	return left, nil
}

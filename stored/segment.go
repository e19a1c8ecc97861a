package stored

import (
	"encoding/binary"
	"errors"
)

// A segment is how the embedded store keeps records: every batch the background writer
// writes is one store value, holding all the records of that batch. Writing a batch is then
// one value appended at the end of the file, whatever the number of records in it, instead of
// a B+tree insert (and, at the cap, a delete) per record at random places of a large tree,
// each of which dirtied pages of its own; that page work was most of what keeping
// responses cost. A record is read back by its place: the segment and the byte range of its
// record (store.GetRange), found in the keeper's index in memory.
//
// The layout: the magic, the records (Encode) one after the other, then an index of them,
// then the index's offset as 4 bytes, big-endian. Records come first so that Keep can
// encode each one into the batch's buffer as it arrives, and the writer only adds the index;
// the buffer is reused from batch to batch, so a kept response allocates no copy of itself.
// An index entry says what its record is to the keeper's index, so a start-up rebuilds that
// from the segments' indexes alone:
//
//	kind (1 byte) | key length (uvarint) | key | ordinal (uvarint) | expiry (varint, Unix ns) | offset (uvarint) | length (uvarint)
//
// The ordinal numbers records in the order they were kept (across segments), which is the
// order the per-owner cap evicts them in.

// segmentMagic opens every segment; its last byte is the format's version.
const segmentMagic = "mgs\x01"

// segmentTrailer is the length of the index offset that ends a segment.
const segmentTrailer = 4

// Entry kinds.
const (
	// entryNew is a record kept for the first time.
	entryNew byte = 'n'
	// entryUpdate is a new version of a kept record (a background response moving on). It
	// brings nothing back: a record deleted or evicted since stays gone.
	entryUpdate byte = 'u'
)

// maxSegmentEntries bounds a decoded index, so a corrupt count cannot ask for a huge
// allocation. The writer's batches are far smaller (batchMax).
const maxSegmentEntries = 1 << 20

// segEntry is one record's index entry.
type segEntry struct {
	kind    byte
	key     string // owner tag/response id
	ordinal uint64
	expires int64 // Unix nanoseconds
	off, n  int   // the record's bytes: segment[off : off+n]
}

// ErrCorruptSegment is returned by decodeSegment for bytes that are not a segment.
var ErrCorruptSegment = errors.New("stored: corrupt segment")

// appendSegmentIndex ends a segment whose records are in buf (after the magic) with the
// index of entries.
func appendSegmentIndex(buf []byte, entries []segEntry) []byte {
	at := len(buf)
	buf = binary.AppendUvarint(buf, uint64(len(entries)))
	for i := range entries {
		e := &entries[i]
		buf = append(buf, e.kind)
		buf = binary.AppendUvarint(buf, uint64(len(e.key)))
		buf = append(buf, e.key...)
		buf = binary.AppendUvarint(buf, e.ordinal)
		buf = binary.AppendVarint(buf, e.expires)
		buf = binary.AppendUvarint(buf, uint64(e.off))
		buf = binary.AppendUvarint(buf, uint64(e.n))
	}
	return binary.BigEndian.AppendUint32(buf, uint32(at))
}

// decodeSegment reads a segment's index. The records themselves are not read (Decode does
// that when one is asked for), but each must lie between the magic and the index.
func decodeSegment(b []byte) ([]segEntry, error) {
	if len(b) < len(segmentMagic)+segmentTrailer || string(b[:len(segmentMagic)]) != segmentMagic {
		return nil, ErrCorruptSegment
	}
	at := int(binary.BigEndian.Uint32(b[len(b)-segmentTrailer:]))
	if at < len(segmentMagic) || at >= len(b)-segmentTrailer {
		return nil, ErrCorruptSegment
	}
	d := decoder{b: b[at : len(b)-segmentTrailer]}
	count := d.uvarint()
	if d.bad || count > maxSegmentEntries || count > uint64(len(d.b)) {
		return nil, ErrCorruptSegment
	}
	entries := make([]segEntry, count)
	for i := range entries {
		if len(d.b) == 0 {
			return nil, ErrCorruptSegment
		}
		e := &entries[i]
		e.kind = d.b[0]
		d.b = d.b[1:]
		e.key = string(d.field())
		e.ordinal = d.uvarint()
		e.expires = d.varint()
		off, n := d.uvarint(), d.uvarint()
		if d.bad || (e.kind != entryNew && e.kind != entryUpdate) || e.key == "" ||
			off < uint64(len(segmentMagic)) || n == 0 || off > uint64(at) || n > uint64(at)-off {
			return nil, ErrCorruptSegment
		}
		e.off, e.n = int(off), int(n)
	}
	if len(d.b) != 0 {
		return nil, ErrCorruptSegment
	}
	return entries, nil
}

//go:build unix

package journal

import (
	"os"
	"syscall"
)

// segment is a segment file mapped into memory, shared with the page cache: what is copied
// into data is in the file.
type segment struct{ data []byte }

// mapSegment allocates size bytes of f on disk, then maps them. The allocation comes first
// so that a full disk fails here, as an error, rather than as a SIGBUS when a copy into the
// mapping reaches a page the filesystem cannot back.
func mapSegment(f *os.File, size int64) (segment, error) {
	if err := allocate(f, size); err != nil {
		return segment{}, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return segment{}, err
	}
	return segment{data: data}, nil
}

// sync has nothing to do: the mapping is the file.
func (segment) sync(int64, int64) error { return nil }

func (s *segment) unmap() {
	if s.data != nil {
		_ = syscall.Munmap(s.data)
		s.data = nil
	}
}

// zeroFill allocates size bytes of f by writing zeros: for filesystems without fallocate(2).
func zeroFill(f *os.File, size int64) error {
	zeros := make([]byte, 64<<10)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	return nil
}

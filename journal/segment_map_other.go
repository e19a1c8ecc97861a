//go:build !unix

package journal

import "os"

// segment is a segment file and a copy of it in memory, written through record by record:
// where mmap(2) is missing, each record costs a write.
type segment struct {
	data []byte
	f    *os.File
}

func mapSegment(f *os.File, size int64) (segment, error) {
	if err := f.Truncate(size); err != nil {
		return segment{}, err
	}
	return segment{data: make([]byte, size), f: f}, nil
}

func (s segment) sync(off, n int64) error {
	_, err := s.f.WriteAt(s.data[off:off+n], off)
	return err
}

func (s *segment) unmap() { s.data = nil }

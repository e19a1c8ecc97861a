//go:build unix && !linux

package journal

import "os"

// allocate reserves size bytes of f's blocks by writing zeros.
func allocate(f *os.File, size int64) error { return zeroFill(f, size) }

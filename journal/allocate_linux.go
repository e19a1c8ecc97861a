package journal

import (
	"errors"
	"os"
	"syscall"
)

// allocate reserves size bytes of f's blocks with fallocate(2), or by writing zeros where
// the filesystem has no fallocate.
func allocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return zeroFill(f, size)
	}
	return err
}

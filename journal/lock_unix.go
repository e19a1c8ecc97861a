//go:build unix

package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile is the file whose lock keeps a second process off a data path's journal: two
// writers would interleave segments and each charge the other's calls.
const lockFile = "journal.lock"

// lockDir takes dir's journal lock, or fails at once if another process holds it. The lock
// goes with the process, so a kill releases it.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("journal: %s is used by another process (one data path per replica)", dir)
		}
		return nil, fmt.Errorf("journal: lock: %w", err)
	}
	return func() { f.Close() }, nil
}

package apitest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size bytes on a fresh directory and returns its path; the
// test's cleanup unmounts it (after the cleanups registered later, such as a store's Close).
// A disk that fills up is a real ENOSPC from the kernel, not a store that pretends. Where
// mounting is not permitted (not root, no CAP_SYS_ADMIN) the test is skipped, saying so,
// unless CI is set: CI runs as root, and must not pass by skipping.
func SmallDisk(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mounting a tmpfs for a full disk (CI runs as root): %v", err)
		}
		t.Skipf("cannot mount a tmpfs here (%v): run as root (as CI does) to test a full disk", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file in dir until the disk is full and returns its path: removing it
// gives the space back.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("filling %s: %v", dir, err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		_, err := f.Write(chunk)
		if errors.Is(err, syscall.ENOSPC) {
			return path
		}
		if err != nil && !errors.Is(err, io.ErrShortWrite) {
			t.Fatalf("filling %s: %v", dir, err)
		}
	}
}

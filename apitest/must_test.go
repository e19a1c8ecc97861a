package apitest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// countSyncer counts its syncs and fails the ones fail says.
type countSyncer struct {
	n    *int
	fail bool
}

func (c countSyncer) Sync(context.Context) error {
	*c.n++
	if c.fail {
		return errors.New("store down")
	}
	return nil
}

func TestSyncAll(t *testing.T) {
	var n int
	a, b := countSyncer{n: &n}, countSyncer{n: &n}
	SyncAll(t, a, b, a)
	if n != 3 {
		t.Fatalf("%d syncs, want 3", n)
	}
	rec := recorded(t, func(tb testing.TB) { SyncAll(tb, a, countSyncer{n: &n, fail: true}, b) })
	if !rec.failed || n != 5 {
		t.Fatalf("failed %v after %d syncs; want a failure at the fifth, the last one skipped", rec.failed, n)
	}
}

// TestFiles: a file TempFile writes reads back whole, readable by its owner alone; reading a
// missing file or writing where no folder is fails the test.
func TestFiles(t *testing.T) {
	path := TempFile(t, "f", []byte("body"))
	if got := ReadFile(t, path); string(got) != "body" {
		t.Fatalf("ReadFile = %q", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(path) != "f" {
		t.Fatalf("%s: %v, %v", path, fi, err)
	}
	if rec := recorded(t, func(tb testing.TB) { WriteFile(tb, filepath.Join(path, "under-a-file"), nil) }); !rec.failed {
		t.Fatal("a failed write did not fail the test")
	}
	if rec := recorded(t, func(tb testing.TB) { ReadFile(tb, path+".missing") }); !rec.failed {
		t.Fatal("a missing file did not fail the test")
	}
}

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

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("body"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ReadFile(t, path); string(got) != "body" {
		t.Fatalf("ReadFile = %q", got)
	}
	if rec := recorded(t, func(tb testing.TB) { ReadFile(tb, path+".missing") }); !rec.failed {
		t.Fatal("a missing file did not fail the test")
	}
}

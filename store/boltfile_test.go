package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBoltFileOption: a store opened with File lives in that file, beside (not in) the
// default one, so two stores can share a data path.
func TestBoltFileOption(t *testing.T) {
	dir := t.TempDir()
	main, err := OpenBolt(dir, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close()
	side, err := OpenBolt(dir, BoltOptions{File: "side.db", NoSync: true})
	if err != nil {
		t.Fatalf("a second file in the same data path: %v", err)
	}
	defer side.Close()
	ctx := context.Background()
	if err := side.Put(ctx, "b", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := main.Get(ctx, "b", "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the side file's record read from the main one: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "side.db")); err != nil {
		t.Error(err)
	}
}

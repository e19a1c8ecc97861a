package apitest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Syncer is a replica's view of figures shared through the record store (a breaker set, a
// calibration table): Sync writes what it learnt and reads back the other replicas'.
type Syncer interface {
	Sync(context.Context) error
}

// SyncAll syncs each replica in the order given (one may come twice: its second sync reads
// what the others wrote after its first); a failed sync fails the test.
func SyncAll[S Syncer](t testing.TB, replicas ...S) {
	t.Helper()
	for _, r := range replicas {
		if err := r.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// ReadFile is os.ReadFile for a file the test needs: a failure fails the test.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteFile writes b to path, readable by the test's user alone (a config may hold keys);
// a failure fails the test.
func WriteFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TempFile writes b to a file called name in a directory of the test's own (removed after
// it) and returns the file's path.
func TempFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	WriteFile(t, path, b)
	return path
}

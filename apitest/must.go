package apitest

import (
	"context"
	"os"
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

// Package storetest opens the record stores that the tests of the packages over store run
// on, so each of them does not write its own: a bbolt store on a test clock, a Redis store on
// a private server, and both as the list a shared-store test runs through.
package storetest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/redisconn/redistest"
	"modelgate/store"
)

// OpenBolt opens a bbolt store in dir on the clock now, and fails the test when it cannot.
// The caller closes it: a test may close it and open dir again, as a restart would.
func OpenBolt(t testing.TB, dir string, now func() time.Time) *store.Bolt {
	t.Helper()
	st, err := store.OpenBolt(dir, store.BoltOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Redis is a store on a private redis-server started for the test (the test is skipped
// without redis-server); it closes with the test.
func Redis(t testing.TB) store.Store {
	t.Helper()
	st := store.NewRedis(redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr}))
	t.Cleanup(func() { st.Close() })
	return st
}

// Backend is one store implementation a test runs on.
type Backend struct {
	Name string
	// Open opens a fresh store of this kind, closed with the test. Redis keeps its own time:
	// now is bbolt's clock only.
	Open func(t *testing.T, now func() time.Time) store.Store
}

// Backends are the implementations a shared-store test runs on: bbolt in a temporary
// directory, and Redis.
func Backends() []Backend {
	return []Backend{
		{"bolt", func(t *testing.T, now func() time.Time) store.Store {
			st := OpenBolt(t, t.TempDir(), now)
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"redis", func(t *testing.T, _ func() time.Time) store.Store { return Redis(t) }},
	}
}

package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/redis/go-redis/v9"

	"modelgate/config"
	"modelgate/redisconn/redistest"
	"modelgate/testclock"
)

type impl struct {
	name string
	open func(t *testing.T) Store
}

func boltImpl() impl {
	return impl{"bolt", func(t *testing.T) Store {
		s, err := OpenBolt(t.TempDir(), BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}}
}

func redisImpl() impl {
	return impl{"redis", func(t *testing.T) Store {
		s := NewRedis(redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr}))
		t.Cleanup(func() { s.Close() })
		return s
	}}
}

func impls() []impl { return []impl{boltImpl(), redisImpl()} }

// eachStore runs test once per implementation, as a subtest named after it, with a store
// of its own.
func eachStore(t *testing.T, test func(t *testing.T, s Store)) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) { test(t, im.open(t)) })
	}
}

func TestValues(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		if _, err := s.Get(ctx, "b", "missing"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get missing: %v, want ErrNotFound", err)
		}
		if err := s.Put(ctx, "b", "k1", []byte("one"), 0); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(ctx, "b", "k1"); err != nil || string(v) != "one" {
			t.Fatalf("Get k1 = %q, %v", v, err)
		}
		if err := s.Put(ctx, "b", "k1", []byte("uno"), 0); err != nil {
			t.Fatal(err)
		}
		if v, _ := s.Get(ctx, "b", "k1"); string(v) != "uno" {
			t.Fatalf("Put did not replace: %q", v)
		}
		// Buckets are separate namespaces.
		if _, err := s.Get(ctx, "other", "k1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("other bucket sees k1: %v", err)
		}
		ok, err := s.Create(ctx, "b", "k1", []byte("x"), 0)
		if err != nil || ok {
			t.Fatalf("Create over a live record = %v, %v; want false", ok, err)
		}
		ok, err = s.Create(ctx, "b", "k2", []byte("two"), 0)
		if err != nil || !ok {
			t.Fatalf("Create new = %v, %v; want true", ok, err)
		}
		existed, err := s.Delete(ctx, "b", "k2")
		if err != nil || !existed {
			t.Fatalf("Delete k2 = %v, %v", existed, err)
		}
		existed, err = s.Delete(ctx, "b", "k2")
		if err != nil || existed {
			t.Fatalf("second Delete k2 = %v, %v; want false", existed, err)
		}
		if _, err := s.Get(ctx, "b", "k2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted record still there: %v", err)
		}
	})
}

func TestGetRange(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		if err := s.Put(ctx, "b", "k", []byte("0123456789"), time.Hour); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			off, n int
			want   string // "" with found false: ErrNotFound
			found  bool
		}{
			{0, 10, "0123456789", true},
			{3, 4, "3456", true},
			{9, 1, "9", true},
			{10, 0, "", true},
			{5, 0, "", true},
			{8, 3, "", false},  // runs past the end
			{11, 0, "", false}, // starts past the end
			{-1, 2, "", false},
			{0, -1, "", false},
		}
		for _, c := range cases {
			v, err := s.GetRange(ctx, "b", "k", c.off, c.n)
			if !c.found {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("GetRange(%d, %d) = %q, %v; want ErrNotFound", c.off, c.n, v, err)
				}
				continue
			}
			if err != nil || string(v) != c.want {
				t.Errorf("GetRange(%d, %d) = %q, %v; want %q", c.off, c.n, v, err, c.want)
			}
		}
		for _, key := range []string{"missing"} {
			if _, err := s.GetRange(ctx, "b", key, 0, 1); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetRange of a missing key: %v, want ErrNotFound", err)
			}
			if _, err := s.GetRange(ctx, "b", key, 0, 0); !errors.Is(err, ErrNotFound) {
				t.Errorf("empty GetRange of a missing key: %v, want ErrNotFound", err)
			}
		}
	})
}

// TestLargeValues covers values past the size bbolt keeps in a bucket of their own, and
// values that change between the two sizes.
func TestLargeValues(t *testing.T) {
	ctx := context.Background()
	big := func(c byte) []byte { return bytes.Repeat([]byte{c}, 100<<10) }
	eachStore(t, func(t *testing.T, s Store) {
		if err := s.Put(ctx, "b", "k", big('a'), time.Hour); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(ctx, "b", "k"); err != nil || !bytes.Equal(v, big('a')) {
			t.Fatalf("Get of a large value: %d bytes, %v", len(v), err)
		}
		if v, err := s.GetRange(ctx, "b", "k", 50<<10, 3); err != nil || string(v) != "aaa" {
			t.Fatalf("GetRange in a large value = %q, %v", v, err)
		}
		if ok, err := s.Create(ctx, "b", "k", []byte("small"), 0); err != nil || ok {
			t.Fatalf("Create over a live large value = %v, %v; want false", ok, err)
		}
		// Large to small and back, in and out of a batch.
		if err := s.Put(ctx, "b", "k", []byte("small"), 0); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(ctx, "b", "k"); err != nil || string(v) != "small" {
			t.Fatalf("after large -> small: %q, %v", v, err)
		}
		err := s.Batch(ctx, func(tx Tx) error {
			if err := tx.Put("b", "k", big('b'), 0); err != nil {
				return err
			}
			if v, err := tx.Get("b", "k"); err != nil || !bytes.Equal(v, big('b')) {
				t.Errorf("in a batch, small -> large: %d bytes, %v", len(v), err)
			}
			return tx.Put("b", "k2", big('c'), 0)
		})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		if err := s.Scan(ctx, "b", "", func(k string, v []byte) error {
			seen[k] = len(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if seen["k"] != 100<<10 || seen["k2"] != 100<<10 || len(seen) != 2 {
			t.Fatalf("Scan saw %v", seen)
		}
		if existed, err := s.Delete(ctx, "b", "k"); err != nil || !existed {
			t.Fatalf("Delete of a large value = %v, %v", existed, err)
		}
		if err := s.Batch(ctx, func(tx Tx) error { return tx.Remove("b", "k2") }); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k", "k2"} {
			if _, err := s.Get(ctx, "b", k); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s still there after removal: %v", k, err)
			}
		}
		if err := s.Put(ctx, "b", "k", []byte("small again"), 0); err != nil {
			t.Fatalf("a small value where a removed large one was: %v", err)
		}
	})
}

func TestScanPrefix(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		// Glob characters in keys must match literally on Redis.
		for _, k := range []string{"team-a/1", "team-a/2", "team-a*/3", "team-b/1", "team-[a]/9"} {
			if err := s.Put(ctx, "scan", k, []byte("v:"+k), 0); err != nil {
				t.Fatal(err)
			}
		}
		cases := []struct {
			prefix string
			want   []string
		}{
			{"team-a/", []string{"team-a/1", "team-a/2"}},
			{"team-a*", []string{"team-a*/3"}},
			{"team-[a]", []string{"team-[a]/9"}},
			{"", []string{"team-[a]/9", "team-a*/3", "team-a/1", "team-a/2", "team-b/1"}},
			{"nobody", nil},
		}
		for _, c := range cases {
			var got []string
			err := s.Scan(ctx, "scan", c.prefix, func(k string, v []byte) error {
				if string(v) != "v:"+k {
					t.Errorf("value of %q = %q", k, v)
				}
				got = append(got, k)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("Scan(%q) = %q, want %q", c.prefix, got, c.want)
			}
		}
		stop := errors.New("stop")
		n := 0
		err := s.Scan(ctx, "scan", "", func(string, []byte) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Fatalf("Scan did not stop on fn's error: n=%d err=%v", n, err)
		}
	})
}

func TestCounters(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		var wg sync.WaitGroup
		// Concurrent adds to one record lose nothing.
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Add(ctx, "usage", "2026-11-26/search", map[string]int64{"requests": 1, "input": 10}, time.Hour); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if err := s.Add(ctx, "usage", "2026-11-27/search", map[string]int64{"requests": 2}, 0); err != nil {
			t.Fatal(err)
		}
		got := scanCounters(t, s, "usage", "2026-11-26/")
		want := map[string]int64{"requests": 20, "input": 200}
		if len(got) != 1 || fmt.Sprint(got["2026-11-26/search"]) != fmt.Sprint(want) {
			t.Fatalf("ScanCounters = %v, want one record %v", got, want)
		}
	})
}

// TestIncrHandsOutDistinctValues: concurrent increments each see a value of their own, the
// property sequence numbers shared by replicas rest on.
func TestIncrHandsOutDistinctValues(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seen = map[int64]bool{}
		)
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := s.Incr(ctx, "seq", "team-a", "n", 1, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if seen[n] {
					t.Errorf("value %d handed out twice", n)
				}
				seen[n] = true
			}()
		}
		wg.Wait()
		for n := int64(1); n <= 30; n++ {
			if !seen[n] {
				t.Fatalf("value %d never handed out: %v", n, seen)
			}
		}
		if n, err := s.Incr(ctx, "seq", "team-a", "n", -5, 0); err != nil || n != 25 {
			t.Fatalf("Incr -5 = %d, %v; want 25", n, err)
		}
		if n, err := s.Incr(ctx, "seq", "team-b", "n", 1, 0); err != nil || n != 1 {
			t.Fatalf("another record starts at 1: %d, %v", n, err)
		}
		// The record stays a counter record like one Add wrote.
		err := s.ScanCounters(ctx, "seq", "team-a", func(_ string, c map[string]int64) error {
			if c["n"] != 25 {
				t.Errorf("ScanCounters sees %v", c)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestVersionChangesOnWrite(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		v0, err := s.Version(ctx, "keys")
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			name    string
			op      func() error
			changes bool
		}{
			{"put", func() error { return s.Put(ctx, "keys", "a", []byte("1"), 0) }, true},
			{"create-existing", func() error { _, err := s.Create(ctx, "keys", "a", []byte("1"), 0); return err }, false},
			{"create-new", func() error { _, err := s.Create(ctx, "keys", "b", []byte("1"), 0); return err }, true},
			{"delete", func() error { _, err := s.Delete(ctx, "keys", "a"); return err }, true},
			{"delete-missing", func() error { _, err := s.Delete(ctx, "keys", "a"); return err }, false},
			{"other-bucket", func() error { return s.Put(ctx, "other", "a", []byte("1"), 0) }, false},
		}
		prev := v0
		for _, st := range steps {
			if err := st.op(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			v, err := s.Version(ctx, "keys")
			if err != nil {
				t.Fatal(err)
			}
			if (v != prev) != st.changes {
				t.Errorf("%s: version %d -> %d, want changed=%v", st.name, prev, v, st.changes)
			}
			prev = v
		}
	})
}

func TestBadBucketNames(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		for _, b := range []string{"", "a:b", "A", "a/b", "a*"} {
			if err := s.Put(ctx, b, "k", nil, 0); err == nil {
				t.Errorf("Put to bucket %q accepted", b)
			}
		}
	})
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "b", "k"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get after Close: %v", err)
		}
	})
}

// boltWithClock is a bbolt store whose expiries are judged by the returned clock, which
// starts at noon on 2026-11-26; the test's cleanup closes it.
func boltWithClock(t *testing.T) (*Bolt, *testclock.Clock) {
	t.Helper()
	c := testclock.At(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	s, err := OpenBolt(t.TempDir(), BoltOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

// Expiry on bbolt is judged by the injected clock.
func TestBoltExpiry(t *testing.T) {
	ctx := context.Background()
	s, c := boltWithClock(t)
	if err := s.Put(ctx, "r", "short", []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "r", "forever", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "u", "c", map[string]int64{"n": 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	large := bytes.Repeat([]byte("L"), largeValue) // kept in a bucket of its own
	if err := s.Put(ctx, "r", "large-short", large, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "r", "large-forever", large, 0); err != nil {
		t.Fatal(err)
	}
	c.Advance(59 * time.Second)
	if _, err := s.Get(ctx, "r", "short"); err != nil {
		t.Fatalf("record gone before its ttl: %v", err)
	}
	c.Advance(time.Second)
	if _, err := s.Get(ctx, "r", "short"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("record alive at its ttl: %v", err)
	}
	if ok, err := s.Create(ctx, "r", "short", []byte("z"), 0); err != nil || !ok {
		t.Fatalf("Create over an expired record = %v, %v", ok, err)
	}
	var keys []string
	_ = s.ScanCounters(ctx, "u", "", func(k string, _ map[string]int64) error { keys = append(keys, k); return nil })
	if len(keys) != 0 {
		t.Fatalf("expired counters still scanned: %v", keys)
	}
	// An expired counter record starts again from zero.
	if err := s.Add(ctx, "u", "c", map[string]int64{"n": 5}, 0); err != nil {
		t.Fatal(err)
	}
	_ = s.ScanCounters(ctx, "u", "", func(k string, m map[string]int64) error {
		if m["n"] != 5 {
			t.Errorf("expired counter carried over: %v", m)
		}
		return nil
	})
	// The periodic sweep removes what expired; what has no ttl stays.
	c.Advance(2 * sweepEvery)
	if err := s.Put(ctx, "r", "trigger", nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "r", "forever"); err != nil {
		t.Fatalf("record without ttl swept: %v", err)
	}
	if v, err := s.Get(ctx, "r", "large-forever"); err != nil || len(v) != len(large) {
		t.Fatalf("large record without ttl swept: %d bytes, %v", len(v), err)
	}
	// The expired large value is gone from the file, not only hidden.
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("r"))
		if bk.Bucket([]byte("large-short")) != nil || bk.Get([]byte("large-short")) != nil {
			t.Error("the sweep left an expired large value in the file")
		}
		if bk.Bucket([]byte("large-forever")) == nil {
			t.Error("a large value is not kept in a bucket of its own")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Records written through bbolt survive a reopen.
func TestBoltReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenBolt(dir, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "keys", "k", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenBolt(dir, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get(ctx, "keys", "k"); err != nil || string(v) != "kept" {
		t.Fatalf("after reopen: %q, %v", v, err)
	}
}

// Redis gives records their ttl itself; the store must pass it on.
func TestRedisTTL(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t).Addr
	s := NewRedis(redis.NewClient(&redis.Options{Addr: addr}))
	defer s.Close()
	raw := redis.NewClient(&redis.Options{Addr: addr})
	defer raw.Close()
	if err := s.Put(ctx, "r", "k", []byte("x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "u", "k", map[string]int64{"n": 1}, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "r", "c", []byte("x"), 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]time.Duration{"mg:st:r:k": time.Hour, "mg:st:u:k": 2 * time.Hour, "mg:st:r:c": 3 * time.Hour} {
		ttl := raw.PTTL(ctx, key).Val()
		if ttl <= want-time.Minute || ttl > want {
			t.Errorf("%s ttl = %v, want about %v", key, ttl, want)
		}
	}
}

// Two replicas on one Redis see each other's writes, and exactly one wins a Create race.
func TestRedisReplicasShare(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t).Addr
	a := NewRedis(redis.NewClient(&redis.Options{Addr: addr}))
	b := NewRedis(redis.NewClient(&redis.Options{Addr: addr}))
	defer a.Close()
	defer b.Close()
	before, _ := b.Version(ctx, "keys")
	if err := a.Put(ctx, "keys", "k", []byte("from-a"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "keys", "k"); err != nil || string(v) != "from-a" {
		t.Fatalf("replica b reads %q, %v", v, err)
	}
	if after, _ := b.Version(ctx, "keys"); after == before {
		t.Fatal("replica b's version did not move after a's write")
	}
	var wins sync.WaitGroup
	results := make([]bool, 10)
	for i := range results {
		wins.Add(1)
		go func() {
			defer wins.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			results[i], _ = s.Create(ctx, "names", "search/prod", []byte{byte(i)}, 0)
		}()
	}
	wins.Wait()
	won := 0
	for _, r := range results {
		if r {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d Create calls won, want exactly 1", won)
	}
}

// FuzzBoltValue feeds arbitrary stored bytes to the decoder a corrupt file would reach.
func FuzzBoltValue(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeValue(0, []byte("x")))
	f.Add(encodeValue(1, []byte(`{"n":1}`)))
	f.Fuzz(func(t *testing.T, v []byte) {
		found, isValue := small(v)
		out, ok := alive(found, isValue, time.Now().UnixNano())
		if ok && len(out) != len(v)-8 {
			t.Fatalf("live returned %d bytes of %d", len(out), len(v))
		}
		if len(v) < 8 && ok {
			t.Fatal("short value accepted")
		}
	})
}

func TestOpenPicksByConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.Ratelimit
		want string
	}{
		{"memory store", config.Ratelimit{Store: "memory", DataPath: t.TempDir()}, "*store.Bolt"},
		{"redis URL", config.Ratelimit{Store: "redis://127.0.0.1:1/0"}, "*store.Redis"},
	} {
		s, err := Open(tc.cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%T", s); got != tc.want {
			t.Fatalf("%s opened %s, want %s", tc.name, got, tc.want)
		}
		s.Close()
	}
	_, err := Open(config.Ratelimit{Store: "redis://user:s3cret@[bad"}, nil, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("bad URL: %v (must fail without echoing the password)", err)
	}
}

// TestBatch: the calls of a Tx mean what the Store's do, and what one wrote is visible to
// the next call of the same batch and to readers afterwards.
func TestBatch(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		if err := s.Put(ctx, "b", "old", []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		v0, _ := s.Version(ctx, "b")
		err := s.Batch(ctx, func(tx Tx) error {
			if ok, err := tx.Create("b", "k1", []byte("one"), time.Hour); !ok || err != nil {
				return fmt.Errorf("Create k1: %v %v", ok, err)
			}
			if ok, err := tx.Create("b", "k1", []byte("again"), time.Hour); ok || err != nil {
				return fmt.Errorf("second Create k1: %v %v", ok, err)
			}
			if v, err := tx.Get("b", "k1"); err != nil || string(v) != "one" {
				return fmt.Errorf("Get k1 in the batch: %q %v", v, err)
			}
			if _, err := tx.Get("b", "none"); !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("Get none: %v", err)
			}
			if err := tx.Put("b", "k2", []byte("two"), 0); err != nil {
				return err
			}
			if ok, err := tx.Delete("b", "old"); !ok || err != nil {
				return fmt.Errorf("Delete old: %v %v", ok, err)
			}
			// A write held for the end of the batch is seen by the batch's next read.
			if err := tx.Put("b", "k3", []byte("three"), 0); err != nil {
				return err
			}
			vs, err := tx.GetMany("b", []string{"k1", "none", "k3", "old"})
			if err != nil || len(vs) != 4 || string(vs[0]) != "one" || vs[1] != nil || string(vs[2]) != "three" || vs[3] != nil {
				return fmt.Errorf("GetMany = %q %v", vs, err)
			}
			if err := tx.Remove("b", "k3"); err != nil {
				return err
			}
			if err := tx.Remove("b", "never"); err != nil {
				return fmt.Errorf("Remove of a missing key: %v", err)
			}
			if err := tx.Put("b", "k4", []byte("four"), time.Hour); err != nil {
				return err
			}
			for want := int64(1); want <= 2; want++ {
				if n, err := tx.Incr("c", "seq", "n", 1, 0); n != want || err != nil {
					return fmt.Errorf("Incr = %d %v, want %d", n, err, want)
				}
			}
			if _, err := tx.Get("Bad/Name", "k"); err == nil {
				return errors.New("a bad bucket name was accepted")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{"k1": "one", "k2": "two", "k4": "four"} {
			if v, err := s.Get(ctx, "b", k); err != nil || string(v) != want {
				t.Errorf("after Batch %s = %q %v", k, v, err)
			}
		}
		for _, k := range []string{"old", "k3"} {
			if _, err := s.Get(ctx, "b", k); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s deleted in Batch, still there: %v", k, err)
			}
		}
		if v1, _ := s.Version(ctx, "b"); v1 == v0 {
			t.Error("Batch left the bucket's version unchanged")
		}
	})
}

// TestBatchAdd: a Tx's Add is Store.Add: counters of a record created or added to, its
// expiry (re)set by a positive ttl, and concurrent batches adding to the same records lose
// no update.
func TestBatchAdd(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		if err := s.Add(ctx, "spend", "d1|team:a", map[string]int64{"micros": 5}, 0); err != nil {
			t.Fatal(err)
		}
		const batches, records = 8, 50
		var wg sync.WaitGroup
		for range batches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Batch(ctx, func(tx Tx) error {
					for i := range records {
						if err := tx.Add("spend", fmt.Sprintf("d1|enduser:a/u%02d", i), map[string]int64{"micros": int64(i), "n": 1}, time.Hour); err != nil {
							return err
						}
					}
					return tx.Add("spend", "d1|team:a", map[string]int64{"micros": 1}, 0)
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got := scanCounters(t, s, "spend", "d1|")
		if len(got) != records+1 {
			t.Fatalf("%d records, want %d", len(got), records+1)
		}
		if c := got["d1|team:a"]; c["micros"] != 5+batches {
			t.Errorf("team record %v, want micros %d", c, 5+batches)
		}
		for i := range records {
			c := got[fmt.Sprintf("d1|enduser:a/u%02d", i)]
			if c["micros"] != int64(i*batches) || c["n"] != batches {
				t.Errorf("u%02d = %v, want micros %d n %d", i, c, i*batches, batches)
			}
		}
		// A bucket of values refuses Add: the batch fails (on bbolt as a whole).
		if err := s.Put(ctx, "vals", "k", []byte("not counters"), 0); err != nil {
			t.Fatal(err)
		}
		err := s.Batch(ctx, func(tx Tx) error { return tx.Add("vals", "k", map[string]int64{"n": 1}, 0) })
		if err == nil {
			t.Error("Add to a value record succeeded")
		}
	})
}

// TestBoltBatchAddExpiry: a batch's Add with a ttl gives the record that expiry, one
// without keeps the one it had (Redis: TestRedisBatchAddOneRoundTrip reads the ttl).
func TestBoltBatchAddExpiry(t *testing.T) {
	ctx := context.Background()
	s, c := boltWithClock(t)
	err := s.Batch(ctx, func(tx Tx) error {
		if err := tx.Add("spend", "short", map[string]int64{"n": 1}, time.Minute); err != nil {
			return err
		}
		return tx.Add("spend", "long", map[string]int64{"n": 1}, time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Batch(ctx, func(tx Tx) error { return tx.Add("spend", "short", map[string]int64{"n": 1}, 0) }); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Minute)
	seen := map[string]int64{}
	err = s.ScanCounters(ctx, "spend", "", func(k string, cs map[string]int64) error { seen[k] = cs["n"]; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen["long"] != 1 {
		t.Errorf("after 2 minutes: %v, want only long", seen)
	}
}

// TestBoltBatchRollsBack: on bbolt a batch is one transaction; fn's error undoes it.
func TestBoltBatchRollsBack(t *testing.T) {
	ctx := context.Background()
	s := boltImpl().open(t)
	boom := errors.New("boom")
	err := s.Batch(ctx, func(tx Tx) error {
		if err := tx.Put("b", "k", []byte("v"), 0); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Batch = %v", err)
	}
	if _, err := s.Get(ctx, "b", "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed batch's write stayed: %v", err)
	}
}

// roundTrips counts what a Redis client sends: one per command or pipeline.
type roundTrips struct{ n int }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n++; return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n++; return next(ctx, cmds) }
}

// dialledRedis is a store on a private redis-server whose connection is already dialled (a
// first Put made), so a hook added next counts the round trips of what follows alone.
func dialledRedis(t *testing.T) (*Redis, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	s := NewRedis(rdb)
	t.Cleanup(func() { s.Close() })
	if err := s.Put(context.Background(), "b", "warm", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	return s, rdb
}

// TestRedisBatchRoundTrips: a batch's writes that need no answer ride with the next call
// that needs one, and the version bumps with the last; a hundred records are a handful of
// round trips, not hundreds.
func TestRedisBatchRoundTrips(t *testing.T) {
	ctx := context.Background()
	s, rdb := dialledRedis(t)
	v0, _ := s.Version(ctx, "b")
	h := &roundTrips{}
	rdb.AddHook(h)
	const n = 100
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", i)
	}
	err := s.Batch(ctx, func(tx Tx) error {
		if _, err := tx.Incr("c", "seq", "n", n, 0); err != nil {
			return err
		}
		for _, k := range keys {
			if err := tx.Put("b", k, []byte(k), time.Hour); err != nil {
				return err
			}
		}
		vs, err := tx.GetMany("b", keys)
		if err != nil {
			return err
		}
		for i, v := range vs {
			if string(v) != keys[i] {
				return fmt.Errorf("GetMany[%d] = %q", i, v)
			}
			if i%2 == 0 {
				if err := tx.Remove("b", keys[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.n > 3 {
		t.Errorf("batch of %d records took %d round trips, want at most 3", n, h.n)
	}
	if v1, _ := s.Version(ctx, "b"); v1 != v0+1 {
		t.Errorf("version %d -> %d, want one bump for the batch", v0, v1)
	}
	for i, k := range keys {
		_, err := s.Get(ctx, "b", k)
		if gone := errors.Is(err, ErrNotFound); gone != (i%2 == 0) {
			t.Errorf("%s gone=%v (%v)", k, gone, err)
		}
	}
}

// TestRedisBatchAddOneRoundTrip: a batch of counter adds, however many records, is one
// pipeline, where Store.Add is a round trip (two with the version bump) per record.
func TestRedisBatchAddOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, rdb := dialledRedis(t)
	h := &roundTrips{}
	rdb.AddHook(h)
	const n = 1000
	err := s.Batch(ctx, func(tx Tx) error {
		for i := range n {
			if err := tx.Add("spend", fmt.Sprintf("k%04d", i), map[string]int64{"micros": int64(i)}, time.Hour); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.n != 1 {
		t.Errorf("a batch of %d adds took %d round trips, want 1", n, h.n)
	}
	var sum, records int64
	err = s.ScanCounters(ctx, "spend", "", func(_ string, c map[string]int64) error { sum += c["micros"]; records++; return nil })
	if err != nil || records != n || sum != n*(n-1)/2 {
		t.Errorf("stored %d records summing %d (%v), want %d summing %d", records, sum, err, n, n*(n-1)/2)
	}
	if d := rdb.PTTL(ctx, recordKey("spend", "k0007")).Val(); d <= 0 || d > time.Hour {
		t.Errorf("a record's ttl is %v, want up to an hour", d)
	}
}

// TestUnversioned: a bucket declared Unversioned works as any other but keeps no version,
// and on Redis a Create or Delete there is one round trip, not two.
func TestUnversioned(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, s Store) {
		s.Unversioned("nv_test")
		if _, err := s.Version(ctx, "nv_test"); !errors.Is(err, ErrUnversioned) {
			t.Errorf("Version of an unversioned bucket: %v", err)
		}
		if ok, err := s.Create(ctx, "nv_test", "k", []byte("v"), time.Hour); !ok || err != nil {
			t.Fatalf("Create: %v %v", ok, err)
		}
		if v, err := s.Get(ctx, "nv_test", "k"); err != nil || string(v) != "v" {
			t.Fatalf("Get: %q %v", v, err)
		}
		if ok, err := s.Delete(ctx, "nv_test", "k"); !ok || err != nil {
			t.Fatalf("Delete: %v %v", ok, err)
		}
		v0, _ := s.Version(ctx, "b")
		err := s.Batch(ctx, func(tx Tx) error { return tx.Put("nv_test", "k2", []byte("v"), 0) })
		if err != nil {
			t.Fatal(err)
		}
		if v1, _ := s.Version(ctx, "b"); v1 != v0 {
			t.Errorf("a write to an unversioned bucket changed another's version")
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	s := NewRedis(rdb)
	s.Unversioned("nv_test")
	t.Cleanup(func() { s.Close() })
	if err := s.Put(ctx, "nv_test", "warm", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	h := &roundTrips{}
	rdb.AddHook(h)
	if ok, err := s.Create(ctx, "nv_test", "k", []byte("v"), time.Hour); !ok || err != nil {
		t.Fatalf("Create: %v %v", ok, err)
	}
	if ok, err := s.Delete(ctx, "nv_test", "k"); !ok || err != nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	if h.n != 2 {
		t.Errorf("Create and Delete took %d round trips, want 2", h.n)
	}
	if n, _ := rdb.Exists(ctx, versionKey("nv_test")).Result(); n != 0 {
		t.Error("an unversioned bucket has a version key")
	}
}

// A ttl that reaches past 2262, where UnixNano wraps, keeps the record rather than making it
// expired at once (a claimed name would otherwise be free again).
func TestBoltExpiryPast2262(t *testing.T) {
	ctx := context.Background()
	s, _ := boltWithClock(t)
	const longest = time.Duration(1<<63 - 1) // about 292 years: past 2262 from 2026
	if won, err := s.Create(ctx, "r", "name", []byte("x"), longest); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	if _, err := s.Get(ctx, "r", "name"); err != nil {
		t.Fatalf("a record kept for 292 years is gone: %v", err)
	}
	if won, _ := s.Create(ctx, "r", "name", []byte("y"), 0); won {
		t.Fatal("the name was claimed twice")
	}
}

// TestUnversionedIsPerStore: a declaration belongs to the store it was made on; another
// store, in the same process, still versions the bucket.
func TestUnversionedIsPerStore(t *testing.T) {
	ctx := context.Background()
	a, err := OpenBolt(t.TempDir(), BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.Unversioned("nv_other")
	b, err := OpenBolt(t.TempDir(), BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := a.Version(ctx, "nv_other"); !errors.Is(err, ErrUnversioned) {
		t.Errorf("declaring store: %v, want ErrUnversioned", err)
	}
	if _, err := b.Version(ctx, "nv_other"); err != nil {
		t.Errorf("another store: %v, want a version", err)
	}
}

// scanCounters is every counter record of bucket under prefix, by key.
func scanCounters(t *testing.T, s Store, bucket, prefix string) map[string]map[string]int64 {
	t.Helper()
	got := map[string]map[string]int64{}
	err := s.ScanCounters(context.Background(), bucket, prefix, func(k string, c map[string]int64) error {
		got[k] = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

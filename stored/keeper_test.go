package stored

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/testclock"
)

// newClock is a settable clock at testclock's origin; tests move it instead of sleeping.
func newClock() *testclock.Clock { return testclock.New() }

func boltStore(t testing.TB, now func() time.Time) store.Store {
	t.Helper()
	s, err := store.OpenBolt(t.TempDir(), store.BoltOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func redisStore(t testing.TB, addr string) store.Store {
	s := store.NewRedis(redis.NewClient(&redis.Options{Addr: addr}))
	t.Cleanup(func() { s.Close() })
	return s
}

// modes are the keeper's two ways of writing: records written before Keep returns, and
// written behind by the background writer.
var modes = []struct {
	name   string
	behind bool
}{{"sync", false}, {"write_behind", true}}

// eachMode runs test once per mode, as a subtest named after it; behind is whether the
// keeper under test writes behind.
func eachMode(t *testing.T, test func(t *testing.T, behind bool)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { test(t, m.behind) })
	}
}

// eachBoltKeeper runs test in each write mode on a keeper of a fresh bbolt store on the wall
// clock, with an hour's TTL and max responses per owner (0: no cap).
func eachBoltKeeper(t *testing.T, max int64, test func(t *testing.T, k *Keeper)) {
	eachMode(t, func(t *testing.T, behind bool) {
		test(t, newKeeper(t, boltStore(t, nil), time.Hour, max, nil, behind))
	})
}

// newKeeper is a keeper for a test; the test waits for its writer before it ends.
func newKeeper(t testing.TB, st store.Store, ttl time.Duration, max int64, now func() time.Time, behind bool) *Keeper {
	k := NewKeeper(st, Options{TTL: ttl, MaxPerOwner: max, Now: now, WriteBehind: behind,
		OnError: func(err error) { t.Errorf("background write: %v", err) }})
	t.Cleanup(k.Flush)
	return k
}

// turnRecord is the record of turn i of a conversation.
func turnRecord(id, parent string, i int) *Record {
	return &Record{
		ID: id, Parent: parent, Status: StatusCompleted, Model: "m",
		Input:  []byte(fmt.Sprintf(`[{"role":"user","content":"q%d"}]`, i)),
		Output: []byte(fmt.Sprintf(`[{"type":"message","id":"msg_%d","role":"assistant","content":[{"type":"output_text","text":"a%d"}]}]`, i, i)),
	}
}

// keepChain keeps a conversation of n turns for owner and returns the ids, oldest first.
func keepChain(t testing.TB, k *Keeper, owner, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	parent := ""
	for i := range n {
		ids[i] = fmt.Sprintf("%s_%03d", prefix, i)
		if err := k.Keep(context.Background(), owner, turnRecord(ids[i], parent, i)); err != nil {
			t.Fatal(err)
		}
		parent = ids[i]
	}
	return ids
}

func TestKeeperExpiresWithItsClock(t *testing.T) {
	eachMode(t, func(t *testing.T, behind bool) {
		ctx := context.Background()
		clk := newClock()
		k := newKeeper(t, boltStore(t, clk.Now), time.Hour, 0, clk.Now, behind)
		ids := keepChain(t, k, "team:a", "resp", 2)
		clk.Advance(30 * time.Minute)
		later := keepChain(t, k, "team:a", "later", 1)
		clk.Advance(30*time.Minute - time.Nanosecond)
		if _, err := k.Get(ctx, "team:a", ids[0]); err != nil {
			t.Fatalf("gone before its ttl: %v", err)
		}
		clk.Advance(time.Nanosecond)
		if _, err := k.Get(ctx, "team:a", ids[0]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("served at its ttl: %v", err)
		}
		if _, err := k.Chain(ctx, "team:a", ids[1], 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Chain of an expired response: %v", err)
		}
		if _, err := k.Get(ctx, "team:a", later[0]); err != nil {
			t.Fatalf("a younger response expired with the old ones: %v", err)
		}
	})
}

// TestKeeperEvictsOldestAtCap: with a cap of 3 the fourth response evicts the first, and a
// conversation that lost its first turn cannot be continued.
func TestKeeperEvictsOldestAtCap(t *testing.T) {
	eachBoltKeeper(t, 3, func(t *testing.T, k *Keeper) {
		ctx := context.Background()
		other := keepChain(t, k, "team:b", "resp", 3) // same ids, another owner: counted apart
		ids := keepChain(t, k, "team:a", "resp", 5)
		k.Flush() // eviction is the background writer's work
		for i, id := range ids {
			_, err := k.Get(ctx, "team:a", id)
			if kept := err == nil; kept != (i >= 2) {
				t.Errorf("response %d kept=%v (%v); want the last 3 kept", i, kept, err)
			}
		}
		for _, id := range other {
			if _, err := k.Get(ctx, "team:b", id); err != nil {
				t.Errorf("another team's response was evicted: %v", err)
			}
		}
		if _, err := k.Chain(ctx, "team:a", ids[4], 0); !errors.Is(err, ErrBrokenChain) {
			t.Errorf("Chain over an evicted turn: %v, want ErrBrokenChain", err)
		}
		// A deleted response still holds its place until the ring comes round to it.
		if ok, err := k.Delete(ctx, "team:a", ids[4]); !ok || err != nil {
			t.Fatalf("Delete: %v %v", ok, err)
		}
		keepChain(t, k, "team:a", "more", 1)
		k.Flush()
		if _, err := k.Get(ctx, "team:a", ids[2]); !errors.Is(err, ErrNotFound) {
			t.Errorf("oldest not evicted after a delete: %v", err)
		}
		if _, err := k.Get(ctx, "team:a", ids[3]); err != nil {
			t.Errorf("second oldest evicted: %v", err)
		}
	})
}

func TestKeeperScopesByOwner(t *testing.T) {
	eachBoltKeeper(t, 0, func(t *testing.T, k *Keeper) {
		ctx := context.Background()
		ids := keepChain(t, k, "team:a", "resp", 2)
		if _, err := k.Get(ctx, "team:b", ids[0]); !errors.Is(err, ErrNotFound) {
			t.Errorf("another owner sees it: %v", err)
		}
		if _, err := k.Chain(ctx, "team:b", ids[1], 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("another owner walks it: %v", err)
		}
		if ok, _ := k.Delete(ctx, "team:b", ids[0]); ok {
			t.Error("another owner deleted it")
		}
		if _, err := k.Get(ctx, "team:a", ids[0]); err != nil {
			t.Errorf("the owner lost it: %v", err)
		}
		// A repeated id never replaces the first record.
		if err := k.Keep(ctx, "team:a", turnRecord(ids[0], "", 9)); !errors.Is(err, ErrExists) {
			t.Errorf("Keep of a kept id: %v", err)
		}
		if r, _ := k.Get(ctx, "team:a", ids[0]); string(r.Input) != `[{"role":"user","content":"q0"}]` {
			t.Errorf("record replaced: %s", r.Input)
		}
		for _, bad := range []string{"", "a/b", "resp 1", string(make([]byte, 300))} {
			if _, err := k.Get(ctx, "team:a", bad); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%q): %v", bad, err)
			}
		}
	})
}

func TestKeeperChainOldestFirst(t *testing.T) {
	eachBoltKeeper(t, 0, func(t *testing.T, k *Keeper) {
		ids := keepChain(t, k, "team:a", "resp", 4)
		chain, err := k.Chain(context.Background(), "team:a", ids[3], 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range chain {
			if r.ID != ids[i] {
				t.Fatalf("chain[%d] = %s, want %s", i, r.ID, ids[i])
			}
		}
		var weight int64
		for _, r := range chain {
			weight += int64(len(r.Input) + len(r.Output) + len(r.Response))
		}
		if _, err := k.Chain(context.Background(), "team:a", ids[3], weight); err != nil {
			t.Errorf("a chain of exactly the limit: %v", err)
		}
		if _, err := k.Chain(context.Background(), "team:a", ids[3], weight-1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("a chain over the limit: %v", err)
		}
	})
}

func TestKeeperUpdateKeepsPlaceAndExpiry(t *testing.T) {
	eachMode(t, func(t *testing.T, behind bool) {
		ctx := context.Background()
		clk := newClock()
		k := newKeeper(t, boltStore(t, clk.Now), time.Hour, 0, clk.Now, behind)
		r := &Record{ID: "resp_bg", Status: StatusQueued, Model: "m"}
		if err := k.Keep(ctx, "team:a", r); err != nil {
			t.Fatal(err)
		}
		exp := r.ExpiresAt
		clk.Advance(10 * time.Minute)
		done := turnRecord("resp_bg", "", 1)
		if err := k.Update(ctx, "team:a", done); err != nil {
			t.Fatal(err)
		}
		got, err := k.Get(ctx, "team:a", "resp_bg")
		if err != nil || got.Status != StatusCompleted || got.ExpiresAt != exp {
			t.Fatalf("after Update: %+v %v", got, err)
		}
		if err := k.Update(ctx, "team:a", &Record{ID: "resp_none"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("Update of nothing: %v", err)
		}
	})
}

// TestKeeperRedisReplicas: two replicas, each with its own connection to one Redis, share
// conversations and one cap.
func TestKeeperRedisReplicas(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t).Addr
	a := newKeeper(t, redisStore(t, addr), time.Hour, 4, nil, false)
	b := newKeeper(t, redisStore(t, addr), time.Hour, 4, nil, false)

	// A turn made on one continues on the other.
	if err := a.Keep(ctx, "team:x", turnRecord("resp_a1", "", 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.Keep(ctx, "team:x", turnRecord("resp_b2", "resp_a1", 2)); err != nil {
		t.Fatal(err)
	}
	chain, err := a.Chain(ctx, "team:x", "resp_b2", 0)
	if err != nil || len(chain) != 2 || chain[0].ID != "resp_a1" {
		t.Fatalf("chain across replicas: %v %v", chain, err)
	}
	if err := b.Keep(ctx, "team:x", turnRecord("resp_a1", "", 3)); !errors.Is(err, ErrExists) {
		t.Errorf("the other replica replaced a record: %v", err)
	}

	// Responses kept alternately through both replicas share one cap, oldest out first.
	var ids []string
	for i := range 6 {
		k := a
		if i%2 == 1 {
			k = b
		}
		id := fmt.Sprintf("resp_alt_%d", i)
		ids = append(ids, id)
		if err := k.Keep(ctx, "team:x", turnRecord(id, "", i)); err != nil {
			t.Fatal(err)
		}
		k.Flush() // the cap's bookkeeping done before the next response comes
	}
	all := append([]string{"resp_a1", "resp_b2"}, ids...)
	for i, id := range all {
		_, err := b.Get(ctx, "team:x", id)
		if kept := err == nil; kept != (i >= len(all)-4) {
			t.Errorf("%s kept=%v; want the last 4 of %v", id, kept, all)
		}
	}
}

// TestKeeperConcurrentKeepsLoseNothing: replicas keeping at once under a cap above their
// number never evict a response that is among the newest.
func TestKeeperConcurrentKeepsLoseNothing(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t).Addr
	ks := []*Keeper{newKeeper(t, redisStore(t, addr), time.Hour, 50, nil, false), newKeeper(t, redisStore(t, addr), time.Hour, 50, nil, false)}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ks[i%2].Keep(ctx, "team:c", turnRecord(fmt.Sprintf("resp_c%d", i), "", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ks[0].Flush()
	ks[1].Flush()
	for i := range 40 {
		if _, err := ks[0].Get(ctx, "team:c", fmt.Sprintf("resp_c%d", i)); err != nil {
			t.Errorf("resp_c%d lost: %v", i, err)
		}
	}
}

// TestKeeperFlushEndsTheWindow: the writer gathers jobs for its batch window, but Flush (a
// graceful stop, or a write to a record still queued) never waits for the window to pass,
// and reads find a queued record meanwhile.
func TestKeeperFlushEndsTheWindow(t *testing.T) {
	ctx := context.Background()
	st := boltStore(t, nil)
	k := NewKeeper(st, Options{TTL: time.Hour, MaxPerOwner: 2, WriteBehind: true, BatchWindow: time.Hour,
		OnError: func(err error) { t.Errorf("background write: %v", err) }})
	t.Cleanup(k.Flush) // before the store closes
	ids := keepChain(t, k, "team:a", "resp", 3)
	if _, err := k.Get(ctx, "team:a", ids[2]); err != nil {
		t.Fatalf("a queued record is not served: %v", err)
	}
	returnsWithin(t, "Flush waited for the batch window", k.Flush)
	// Written: a keeper starting afresh on the store finds it.
	again := NewKeeper(st, Options{TTL: time.Hour, MaxPerOwner: 2, WriteBehind: true})
	if err := again.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Get(ctx, "team:a", ids[2]); err != nil {
		t.Errorf("not in the store after Flush: %v", err)
	}
	if _, err := k.Get(ctx, "team:a", ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("the oldest of 3 under a cap of 2 is still kept: %v", err)
	}
	// Deleting a queued record waits for its write, not for the window.
	more := keepChain(t, k, "team:a", "more", 1)
	returnsWithin(t, "Delete of a queued record waited for the batch window", func() {
		if ok, err := k.Delete(ctx, "team:a", more[0]); !ok || err != nil {
			t.Errorf("Delete: %v %v", ok, err)
		}
	})
}

// returnsWithin runs f and fails with late when it has not returned in 30 seconds: a bound
// no healthy call nears on a loaded machine, far below the hour-long window a call that
// waited for its batch window would take.
func returnsWithin(t *testing.T, late string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal(late)
	}
}

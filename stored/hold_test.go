package stored

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/store"
	"modelgate/store/storetest"
)

// waitFor polls cond until it holds, failing the test after a generous deadline (the
// retries run on a real timer).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	apitest.WaitFor(t, 30*time.Second, what, cond)
}

// TestKeeperHoldsWhatTheStoreRefuses: in both modes, records kept while the store refuses
// writes are held in memory, read from there (Get, Chain) on this replica, make the store's
// health degraded, fill the memory bound (Full), and are all written once the store takes
// writes again: then a new keeper over the store alone (a restart, another replica) reads
// every one of them.
func TestKeeperHoldsWhatTheStoreRefuses(t *testing.T) {
	eachMode(t, func(t *testing.T, behind bool) {
		ctx := context.Background()
		base := boltStore(t, nil)
		st := &storetest.Refusing{Store: base}
		health := &store.WriteHealth{}
		var errs atomic.Int64
		k := NewKeeper(st, Options{TTL: time.Hour, MaxPerOwner: 100, WriteBehind: behind, BatchWindow: -1,
			HoldBytes: 4 << 10, RetryEvery: 10 * time.Millisecond, Health: health,
			OnError: func(error) { errs.Add(1) }})
		t.Cleanup(k.Stop)

		before := keepChain(t, k, "team:a", "early", 2) // written
		k.Flush()
		st.Refuse.Store(true)
		var ids []string
		parent := before[1]
		for i := 0; !k.Full(); i++ {
			if i > 1000 {
				t.Fatal("the keeper never filled its memory for held records")
			}
			id := fmt.Sprintf("held_%03d", i)
			if err := k.Keep(ctx, "team:a", turnRecord(id, parent, i)); err != nil {
				t.Fatalf("Keep %s while the store refuses: %v", id, err)
			}
			k.Flush()
			ids, parent = append(ids, id), id
		}
		n, bytes := k.Held()
		if n != len(ids) || bytes < 4<<10 {
			t.Fatalf("Held() = %d records, %d bytes; want %d records, at least %d bytes", n, bytes, len(ids), 4<<10)
		}
		if health.Degraded() == "" {
			t.Error("the store's health is not degraded while writes fail")
		}
		if storetest.WriteFailures(health, store.WriterResponses) == 0 {
			t.Error("no responses write failure counted")
		}
		// Read from memory, and continued from there.
		for _, id := range ids {
			if r, err := k.Get(ctx, "team:a", id); err != nil || r.ID != id {
				t.Fatalf("Get %s while held: %v", id, err)
			}
		}
		chain, err := k.Chain(ctx, "team:a", ids[len(ids)-1], 0)
		if err != nil || len(chain) != len(ids)+2 {
			t.Fatalf("Chain while held: %d records, %v; want %d", len(chain), err, len(ids)+2)
		}
		if err := k.Keep(ctx, "team:a", turnRecord(ids[0], "", 0)); !errors.Is(err, ErrExists) {
			t.Errorf("keeping a held id again: %v, want ErrExists", err)
		}
		// A held record is updated in memory and deleted from memory.
		upd := turnRecord(ids[0], before[1], 0)
		upd.Status = StatusIncomplete
		if behind {
			// The update is held behind its record: its caller hears of the failure, and
			// it is written after the record all the same.
			if err := k.Update(ctx, "team:a", upd); err == nil {
				t.Error("an update the store refused reported success")
			}
		} else if err := k.Update(ctx, "team:a", upd); err != nil {
			t.Errorf("Update of a held record: %v", err)
		}
		if r, err := k.Get(ctx, "team:a", ids[0]); err != nil || r.Status != StatusIncomplete {
			t.Errorf("a held record after its update: %+v %v", r, err)
		}

		st.Refuse.Store(false)
		waitFor(t, "every held record is written", func() bool { n, _ := k.Held(); return n == 0 })
		k.Flush()
		if k.Full() {
			t.Error("Full after every held record was written")
		}
		if d := health.Degraded(); d != "" {
			t.Errorf("still degraded after the store recovered: %s", d)
		}
		var again *Keeper
		if behind {
			again = reopen(t, base, time.Hour, 100, nil)
		} else {
			again = newKeeper(t, base, time.Hour, 100, nil, false)
		}
		for _, id := range append(before, ids...) {
			r, err := again.Get(ctx, "team:a", id)
			if err != nil || r.ID != id {
				t.Fatalf("%s read from the store after it recovered: %v", id, err)
			}
			if id == ids[0] && r.Status != StatusIncomplete {
				t.Errorf("%s lost its update: status %q", id, r.Status)
			}
		}
		if behind && errs.Load() == 0 {
			t.Error("the writer's failures were not reported to OnError")
		}
	})
}

// TestKeepDurableRefusedIsNotHeld: a background response's first record that the store
// refuses is not held, in either mode: KeepDurable's caller hears of the failure and answers
// its client so, and the id must not come back later.
func TestKeepDurableRefusedIsNotHeld(t *testing.T) {
	eachMode(t, func(t *testing.T, behind bool) {
		ctx := context.Background()
		st, k := refusedKeeper(t, behind)
		if err := k.KeepDurable(ctx, "team:a", turnRecord("resp_bg", "", 0)); err == nil {
			t.Fatal("KeepDurable succeeded while the store refuses writes")
		}
		if n, _ := k.Held(); n != 0 {
			t.Errorf("%d records held after a refused KeepDurable, want 0", n)
		}
		if _, err := k.Get(ctx, "team:a", "resp_bg"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get of the refused record: %v, want ErrNotFound", err)
		}
		st.Refuse.Store(false)
		k.Flush()
		var again *Keeper
		if behind {
			again = reopen(t, st.Store, time.Hour, 0, nil)
		} else {
			again = newKeeper(t, st.Store, time.Hour, 0, nil, false)
		}
		if _, err := again.Get(ctx, "team:a", "resp_bg"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the refused record read from the store: %v, want ErrNotFound", err)
		}
	})
}

// TestKeeperDeletesAHeldRecord: a record deleted while held is never written.
func TestKeeperDeletesAHeldRecord(t *testing.T) {
	eachMode(t, func(t *testing.T, behind bool) {
		ctx := context.Background()
		st, k := refusedKeeper(t, behind)
		keepChain(t, k, "team:a", "keep", 1)
		if err := k.Keep(ctx, "team:a", turnRecord("gone", "", 0)); err != nil {
			t.Fatal(err)
		}
		k.Flush()
		if !behind {
			if ok, err := k.Delete(ctx, "team:a", "gone"); !ok || err != nil {
				t.Fatalf("Delete of a held record: %v %v", ok, err)
			}
		}
		st.Refuse.Store(false)
		if behind {
			// The embedded store marks a deleted record gone in the store, so the delete
			// waits for it to take writes.
			if ok, err := k.Delete(ctx, "team:a", "gone"); !ok || err != nil {
				t.Fatalf("Delete of a held record: %v %v", ok, err)
			}
		}
		waitFor(t, "the held records are written", func() bool { n, _ := k.Held(); return n == 0 })
		if _, err := k.Get(ctx, "team:a", "gone"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the deleted record: %v, want ErrNotFound", err)
		}
		if _, err := k.Get(ctx, "team:a", "keep_000"); err != nil {
			t.Errorf("the other record: %v", err)
		}
	})
}

// TestKeeperStopEndsRetries: Stop returns while the store still refuses, and the writer
// goroutine ends.
func TestKeeperStopEndsRetries(t *testing.T) {
	eachMode(t, func(t *testing.T, behind bool) {
		st := &storetest.Refusing{Store: boltStore(t, nil)}
		k := NewKeeper(st, Options{TTL: time.Hour, WriteBehind: behind, RetryEvery: time.Hour, OnError: func(error) {}})
		st.Refuse.Store(true)
		keepChain(t, k, "team:a", "r", 3)
		k.Flush()
		returnsWithin(t, "Stop did not return", k.Stop)
		k.mu.Lock()
		running := k.running
		k.mu.Unlock()
		if running {
			t.Error("the writer still runs after Stop")
		}
		if n, _ := k.Held(); n != 3 {
			t.Errorf("Held() = %d after Stop, want the 3 records it could not write", n)
		}
	})
}

// refusedKeeper is a keeper (write-behind or not) retrying every 10 ms over a store that
// refuses record writes until its Refuse is cleared; the keeper stops with the test.
func refusedKeeper(t *testing.T, behind bool) (*storetest.Refusing, *Keeper) {
	st := &storetest.Refusing{Store: boltStore(t, nil)}
	k := NewKeeper(st, Options{TTL: time.Hour, WriteBehind: behind, RetryEvery: 10 * time.Millisecond, OnError: func(error) {}})
	t.Cleanup(k.Stop)
	st.Refuse.Store(true)
	return st, k
}

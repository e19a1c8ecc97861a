package stored

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/store"
)

// reopen is what a restart does with the embedded store: a new keeper over the same store,
// its index read back from the segments.
func reopen(t *testing.T, st store.Store, ttl time.Duration, max int64, now func() time.Time) *Keeper {
	t.Helper()
	k := newKeeper(t, st, ttl, max, now, true)
	if err := k.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return k
}

func segmentCount(t *testing.T, st store.Store) int {
	t.Helper()
	n := 0
	if err := st.Scan(context.Background(), bucketSegments, "", func(string, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestKeeperRestartRebuildsIndex(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st := boltStore(t, clk.Now)
	k := newKeeper(t, st, time.Hour, 0, clk.Now, true)
	a := keepChain(t, k, "team:a", "resp", 4)
	k.Flush() // one batch for the chain, and one each for what follows
	b := keepChain(t, k, "team:b", "resp", 2)
	k.Flush()
	done := turnRecord(a[1], a[0], 1)
	done.Status = StatusIncomplete
	if err := k.Update(ctx, "team:a", done); err != nil {
		t.Fatal(err)
	}
	if ok, err := k.Delete(ctx, "team:b", b[0]); !ok || err != nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	k.Flush()

	k2 := reopen(t, st, time.Hour, 0, clk.Now)
	chain, err := k2.Chain(ctx, "team:a", a[3], 0)
	if err != nil || len(chain) != 4 {
		t.Fatalf("Chain after a restart: %d records, %v", len(chain), err)
	}
	for i, r := range chain {
		if r.ID != a[i] || !bytes.Equal(r.Input, turnRecord(a[i], "", i).Input) {
			t.Errorf("turn %d after a restart: %+v", i, r)
		}
	}
	if chain[1].Status != StatusIncomplete {
		t.Errorf("the update was lost in the restart: status %q", chain[1].Status)
	}
	if _, err := k2.Get(ctx, "team:b", b[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted response came back after a restart: %v", err)
	}
	if _, err := k2.Get(ctx, "team:b", b[1]); err != nil {
		t.Errorf("another team's response lost in the restart: %v", err)
	}
	// A repeated id is still refused, and new responses go on being kept.
	if err := k2.Keep(ctx, "team:a", turnRecord(a[0], "", 0)); !errors.Is(err, ErrExists) {
		t.Errorf("a kept id was accepted again after a restart: %v", err)
	}
	more := keepChain(t, k2, "team:a", "more", 2)
	k2.Flush()

	// A third start with a cap of 3 keeps team a's newest three, in the order kept across
	// both earlier runs; past their ttl, none is loaded.
	k3 := reopen(t, st, time.Hour, 3, clk.Now)
	for id, want := range map[string]bool{a[0]: false, a[1]: false, a[2]: false, a[3]: true, more[0]: true, more[1]: true} {
		if _, err := k3.Get(ctx, "team:a", id); (err == nil) != want {
			t.Errorf("%s kept=%v (%v) at a cap of 3; want %v", id, err == nil, err, want)
		}
	}
	k3.Flush()
	clk.Advance(time.Hour)
	k4 := reopen(t, st, time.Hour, 3, clk.Now)
	if _, err := k4.Get(ctx, "team:a", more[1]); !errors.Is(err, ErrNotFound) {
		t.Errorf("an expired response was loaded: %v", err)
	}
}

// TestKeeperRemovesEmptySegments: a segment is removed from the store once none of its
// records is kept, so the store holds no more than the cap.
func TestKeeperRemovesEmptySegments(t *testing.T) {
	st := boltStore(t, nil)
	k := newKeeper(t, st, time.Hour, 2, nil, true)
	for i := range 10 {
		keepChain(t, k, "team:a", fmt.Sprintf("r%d", i), 1)
		k.Flush() // a segment per response
	}
	k.Flush() // the removals of the last batch
	if n := segmentCount(t, st); n != 2 {
		t.Errorf("%d segments in the store for a cap of 2 (one response each), want 2", n)
	}
	// A deleted response's segment goes too.
	ids := keepChain(t, k, "team:b", "b", 1)
	k.Flush()
	if ok, err := k.Delete(context.Background(), "team:b", ids[0]); !ok || err != nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	k.Flush()
	if n := segmentCount(t, st); n != 2 {
		t.Errorf("%d segments after deleting the only response of one, want 2", n)
	}
}

// TestKeeperCompactsSparseSegments: a quiet team's response kept in each batch of a busy
// team's, whose cap evicts its own, would pin every one of those segments; compaction moves
// the quiet one's records on, and the store holds about what the caps allow.
func TestKeeperCompactsSparseSegments(t *testing.T) {
	ctx := context.Background()
	st := boltStore(t, nil)
	// Batches are cut by the Flush calls alone, as the comment on the sizes below assumes: the
	// window is longer than the test, so a slow machine cannot cut one in two.
	k := NewKeeper(st, Options{TTL: time.Hour, MaxPerOwner: 10, WriteBehind: true, BatchWindow: time.Hour,
		Compaction: Compaction{MinBytes: 4 << 10},
		OnError:    func(err error) { t.Errorf("background write: %v", err) }})
	t.Cleanup(k.Flush)
	var quiet []string
	for i := range 20 {
		quiet = append(quiet, keepChain(t, k, "team:quiet", fmt.Sprintf("q%02d", i), 1)...)
		keepChain(t, k, "team:busy", fmt.Sprintf("b%02d", i), 30)
		k.Flush()
	}
	checkSegments(t, k, st)
	// Each batch is some 5.6 KB, of which the quiet response is 0.2 KB: kept in place, the 10
	// quiet responses would hold 56 KB of segments; moved, about 2 KB, plus the busy team's
	// newest batch and the oldest segment (never compacted: the caps are emptying it).
	total := 0
	if err := st.Scan(ctx, bucketSegments, "", func(_ string, v []byte) error { total += len(v); return nil }); err != nil {
		t.Fatal(err)
	}
	if total > 16<<10 {
		t.Errorf("segments hold %d bytes for 10 quiet and 10 busy responses of about 0.2 KB", total)
	}
	for i, id := range quiet {
		_, err := k.Get(ctx, "team:quiet", id)
		if kept := err == nil; kept != (i >= 10) {
			t.Errorf("quiet response %d kept=%v (%v), want the newest 10", i, kept, err)
		}
	}
	k2 := reopen(t, st, time.Hour, 10, nil)
	for _, id := range quiet[10:] {
		if r, err := k2.Get(ctx, "team:quiet", id); err != nil || r.ID != id {
			t.Errorf("a moved response after a restart: %+v %v", r, err)
		}
	}
	checkSegments(t, k2, st)
}

// TestKeeperPendingReadIsACopy: a record read while it waits for the writer stays intact
// when its batch buffer is reused for later batches.
func TestKeeperPendingReadIsACopy(t *testing.T) {
	ctx := context.Background()
	st := boltStore(t, nil)
	k := NewKeeper(st, Options{TTL: time.Hour, WriteBehind: true, BatchWindow: time.Hour,
		OnError: func(err error) { t.Errorf("background write: %v", err) }})
	t.Cleanup(k.Flush)
	ids := keepChain(t, k, "team:a", "first", 1)
	got, err := k.Get(ctx, "team:a", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	want := Encode(got)
	for i := range 5 {
		keepChain(t, k, "team:a", fmt.Sprintf("later%d", i), 3)
		k.Flush()
	}
	if !bytes.Equal(Encode(got), want) {
		t.Fatal("a record read while pending changed when its buffer was reused")
	}
}

// TestKeeperMigratesTheOneValuePerRecordLayout: records kept before segments (one store
// value each, with the ring's slots) are moved into segments at start-up, and the old
// layout's values are removed.
func TestKeeperMigratesTheOneValuePerRecordLayout(t *testing.T) {
	ctx := context.Background()
	st := boltStore(t, nil)
	old := newKeeper(t, st, time.Hour, 10, nil, false) // writes the old layout
	ids := keepChain(t, old, "team:a", "resp", 3)
	old.Flush()
	k := reopen(t, st, time.Hour, 10, nil)
	chain, err := k.Chain(ctx, "team:a", ids[2], 0)
	if err != nil || len(chain) != 3 {
		t.Fatalf("Chain of migrated records: %d, %v", len(chain), err)
	}
	for _, bucket := range []string{bucketRecords, bucketSlots} {
		n := 0
		_ = st.Scan(ctx, bucket, "", func(string, []byte) error { n++; return nil })
		if n != 0 {
			t.Errorf("%d values of the old layout left in %s", n, bucket)
		}
	}
	k.Flush()
	k2 := reopen(t, st, time.Hour, 10, nil)
	if _, err := k2.Get(ctx, "team:a", ids[0]); err != nil {
		t.Errorf("a migrated record is not in a segment: %v", err)
	}
}

// TestKeeperSkipsAnUnreadableSegment: a damaged segment costs its own records, reported,
// and nothing else.
func TestKeeperSkipsAnUnreadableSegment(t *testing.T) {
	ctx := context.Background()
	st := boltStore(t, nil)
	k := newKeeper(t, st, time.Hour, 0, nil, true)
	ids := keepChain(t, k, "team:a", "resp", 2)
	k.Flush()
	if err := st.Put(ctx, bucketSegments, segKey(999), []byte("mgs\x01 not a segment"), time.Hour); err != nil {
		t.Fatal(err)
	}
	var reported []error
	k2 := NewKeeper(st, Options{TTL: time.Hour, WriteBehind: true, OnError: func(err error) { reported = append(reported, err) }})
	if err := k2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	k2.Flush()
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "unreadable") {
		t.Errorf("reported %v, want one unreadable segment", reported)
	}
	if _, err := k2.Get(ctx, "team:a", ids[1]); err != nil {
		t.Errorf("a good segment's record lost: %v", err)
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	recs := []*Record{turnRecord("a", "", 0), turnRecord("b", "a", 1), {ID: "c", Status: StatusQueued}}
	buf := []byte(segmentMagic)
	entries := make([]segEntry, len(recs))
	for i, r := range recs {
		off := len(buf)
		buf = appendRecord(buf, r)
		entries[i] = segEntry{kind: entryNew, key: "tag/" + r.ID, ordinal: uint64(i + 7), expires: int64(1000 + i), off: off, n: len(buf) - off}
	}
	entries[2].kind = entryUpdate
	seg := appendSegmentIndex(buf, entries)
	got, err := decodeSegment(seg)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(entries) {
		t.Fatalf("index round trip:\n got %v\nwant %v", got, entries)
	}
	for i, e := range got {
		r, err := Decode(seg[e.off : e.off+e.n])
		if err != nil || r.ID != recs[i].ID {
			t.Errorf("record %d at its place: %+v, %v", i, r, err)
		}
	}
	for _, bad := range [][]byte{nil, []byte("mgs\x01"), seg[:len(seg)-1], append([]byte("xxxx"), seg[4:]...)} {
		if _, err := decodeSegment(bad); !errors.Is(err, ErrCorruptSegment) {
			t.Errorf("decodeSegment(%q...) = %v, want ErrCorruptSegment", bad[:min(len(bad), 8)], err)
		}
	}
}

// FuzzDecodeSegment: whatever the bytes, decodeSegment returns an error or entries whose
// places lie inside the segment, and never panics.
func FuzzDecodeSegment(f *testing.F) {
	buf := []byte(segmentMagic)
	buf = appendRecord(buf, turnRecord("a", "", 0))
	f.Add(appendSegmentIndex(buf, []segEntry{{kind: entryNew, key: "t/a", ordinal: 1, expires: 5, off: 4, n: len(buf) - 4}}))
	f.Add([]byte("mgs\x01\x00\x00\x00\x00\x00\x00\x04"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeSegment(b)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.off < len(segmentMagic) || e.n <= 0 || e.off+e.n > len(b) {
				t.Fatalf("entry %+v outside a segment of %d bytes", e, len(b))
			}
			_, _ = Decode(b[e.off : e.off+e.n])
		}
	})
}

// TestKeeperAgainstAModel runs random keeps, updates, deletes and restarts on the embedded
// layout and checks, after every flush, that exactly the responses a simple model says are
// kept can be read, each in its newest version. The model: each owner's responses in the
// order kept; past the cap the oldest go, a deleted one holding its place until it reaches
// the front (until a restart, which rebuilds the queue from the records kept).
func TestKeeperAgainstAModel(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { keeperAgainstAModel(t, seed) })
	}
}

func keeperAgainstAModel(t *testing.T, seed uint64) {
	var compaction Compaction
	if seed%2 == 1 {
		// Every segment that lost a record is compacted: its moves race everything else.
		compaction = Compaction{MinBytes: 1, Ratio: 1}
	}
	ctx := context.Background()
	const capacity = 12
	st := boltStore(t, nil)
	reopen := func() *Keeper {
		t.Helper()
		k := NewKeeper(st, Options{TTL: time.Hour, MaxPerOwner: capacity, WriteBehind: true, Compaction: compaction,
			OnError: func(err error) { t.Errorf("background write: %v", err) }})
		t.Cleanup(k.Flush)
		if err := k.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := reopen()
	rng := rand.New(rand.NewPCG(seed, 11))
	owners := []string{"team:a", "team:b", "team:c"}
	type slot struct {
		id      string
		deleted bool
	}
	queues := map[string][]slot{}
	status := map[string]string{} // owner + " " + id -> newest status, for live responses
	var all []string              // every owner + " " + id ever kept
	next := 0
	statuses := []string{StatusCompleted, StatusIncomplete, StatusFailed}
	// The writer may run at any moment, so a response past the cap may be gone before the
	// next flush: only the newest capacity of an owner's queue are sure to be there.
	liveIDs := func(owner string) []string {
		var ids []string
		q := queues[owner]
		for _, s := range q[max(0, len(q)-capacity):] {
			if _, ok := status[owner+" "+s.id]; ok {
				ids = append(ids, s.id)
			}
		}
		return ids
	}
	// applyCap is what the writer does once a batch is written: the oldest past the cap go,
	// a deleted response counting until it reaches the front.
	applyCap := func() {
		for o, q := range queues {
			for len(q) > capacity {
				delete(status, o+" "+q[0].id)
				q = q[1:]
			}
			queues[o] = q
		}
	}
	defer func() { checkSegments(t, k, st) }() // the keeper of the last start
	for step := range 600 {
		owner := owners[rng.IntN(len(owners))]
		switch op := rng.IntN(20); {
		case op < 12:
			next++
			id := fmt.Sprintf("resp_%05d", next)
			if err := k.Keep(ctx, owner, turnRecord(id, "", next)); err != nil {
				t.Fatalf("step %d: Keep: %v", step, err)
			}
			queues[owner] = append(queues[owner], slot{id: id})
			status[owner+" "+id] = StatusCompleted
			all = append(all, owner+" "+id)
			// The writer evicts when the batch is written; the model, at the next check.
		case op < 15:
			if ids := liveIDs(owner); len(ids) > 0 {
				id := ids[rng.IntN(len(ids))]
				r := turnRecord(id, "", 0)
				r.Status = statuses[rng.IntN(len(statuses))]
				if err := k.Update(ctx, owner, r); err != nil {
					t.Fatalf("step %d: Update %s: %v", step, id, err)
				}
				status[owner+" "+id] = r.Status
			}
		case op < 18:
			if ids := liveIDs(owner); len(ids) > 0 {
				id := ids[rng.IntN(len(ids))]
				if ok, err := k.Delete(ctx, owner, id); !ok || err != nil {
					t.Fatalf("step %d: Delete %s: %v %v", step, id, ok, err)
				}
				delete(status, owner+" "+id)
				for i := range queues[owner] {
					if queues[owner][i].id == id {
						queues[owner][i].deleted = true
					}
				}
			}
		case op < 19:
			k.Flush() // the cap applies, then the restart forgets what deleted responses held
			applyCap()
			k = reopen()
			for o, q := range queues {
				kept := q[:0]
				for _, s := range q {
					if !s.deleted {
						if _, ok := status[o+" "+s.id]; ok {
							kept = append(kept, s)
						}
					}
				}
				queues[o] = kept
			}
		default:
			k.Flush()
		}
		// After a flush the cap has been applied: the model applies it too, and both agree.
		if rng.IntN(4) == 0 {
			k.Flush()
			applyCap()
			for _, key := range all {
				o, id, _ := strings.Cut(key, " ")
				want, live := status[key]
				r, err := k.Get(ctx, o, id)
				switch {
				case live && err != nil:
					dumpQueues(t, k, queues, o)
					t.Fatalf("step %d: %s lost: %v", step, key, err)
				case live && r.Status != want:
					t.Fatalf("step %d: %s has status %q, want %q", step, key, r.Status, want)
				case !live && !errors.Is(err, ErrNotFound):
					t.Fatalf("step %d: %s should be gone: %+v %v", step, key, r, err)
				}
			}
		}
	}
}

// checkSegments fails when the index's count of a segment's records is not the number of
// records it points into that segment, or the store holds a segment the index has none in.
func checkSegments(t *testing.T, k *Keeper, st store.Store) {
	t.Helper()
	k.Flush()
	k.Flush() // the removals the last batch noted
	k.mu.Lock()
	counted := map[uint64]int{}
	for _, e := range k.entries {
		for ; e != nil; e = e.next {
			if e.written {
				counted[e.at.seg]++
			}
		}
	}
	for seq, info := range k.segs {
		if info.live != counted[seq] {
			t.Errorf("segment %d: the index counts %d records, %d point into it", seq, info.live, counted[seq])
		}
	}
	segs := len(k.segs)
	k.mu.Unlock()
	if n := segmentCount(t, st); n != segs {
		t.Errorf("%d segments in the store, the index points into %d", n, segs)
	}
}

func dumpQueues[S any](t *testing.T, k *Keeper, model map[string][]S, o string) {
	t.Logf("model %v", model[o])
	k.mu.Lock()
	defer k.mu.Unlock()
	if q := k.queues[k.ownerTag(o)]; q != nil {
		var ks []string
		for _, it := range q.items[q.head:] {
			ks = append(ks, fmt.Sprintf("%s:%d:%v", it.e.key[38:], it.ordinal, it.current()))
		}
		t.Logf("keeper %v, evicted to %d", ks, k.evicted[k.ownerTag(o)])
	}
}

// blockingStore holds the writer inside its next Batch until released.
type blockingStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	held    atomic.Bool
}

// Batch holds the first write until the test lets it go; later writes pass. The first waits
// for the test to see it enter: a send that gave up when the test was not yet receiving let
// that write through unheld whenever the writer got there first (on a loaded machine), and
// the test then waited for it forever.
func (b *blockingStore) Batch(ctx context.Context, fn func(store.Tx) error) error {
	if b.held.CompareAndSwap(false, true) {
		b.entered <- struct{}{}
		<-b.release
	}
	return b.Store.Batch(ctx, fn)
}

// TestFlushLeavesNoKickBehind: a wake-up sent while the writer is busy writing (a second
// Flush, a full batch) must not outlive that writer. Left in the channel, it cut the next
// writer's first window short wherever the keeps had got to, so the same keeps made
// different batches from run to run (and TestKeeperCompactsSparseSegments flaked).
func TestFlushLeavesNoKickBehind(t *testing.T) {
	bs := &blockingStore{Store: boltStore(t, nil), entered: make(chan struct{}), release: make(chan struct{})}
	k := NewKeeper(bs, Options{TTL: time.Hour, MaxPerOwner: 10, WriteBehind: true, BatchWindow: time.Hour,
		OnError: func(err error) { t.Errorf("background write: %v", err) }})
	keepChain(t, k, "team:a", "a", 1)
	flushed := make(chan struct{})
	go func() { k.Flush(); close(flushed) }()
	<-bs.entered // the writer is inside its write, past its window
	k.wake()     // as a second Flush or a full batch would
	close(bs.release)
	<-flushed
	k.mu.Lock()
	left, running := len(k.kick), k.running
	k.mu.Unlock()
	if running || left != 0 {
		t.Fatalf("after the writer stopped: running=%v, %d wake-ups left for the next one", running, left)
	}
}

// TestKeepDurableIsWrittenWhenItReturns: a background response's first record is on disk
// when KeepDurable returns, whatever the batch window; one kept with Keep may still wait for
// the writer (and a reader already sees it), which a crash would lose.
func TestKeepDurableIsWrittenWhenItReturns(t *testing.T) {
	st := boltStore(t, nil)
	k := NewKeeper(st, Options{TTL: time.Hour, MaxPerOwner: 10, WriteBehind: true, BatchWindow: time.Hour,
		OnError: func(err error) { t.Errorf("background write: %v", err) }})
	t.Cleanup(k.Flush)
	ctx := context.Background()
	if err := k.Keep(ctx, "team:a", turnRecord("resp_behind", "", 0)); err != nil {
		t.Fatal(err)
	}
	if err := k.KeepDurable(ctx, "team:a", turnRecord("resp_durable", "", 1)); err != nil {
		t.Fatal(err)
	}
	// What a restart finds, read from the store alone.
	after := reopen(t, st, time.Hour, 10, nil)
	if r, err := after.Get(ctx, "team:a", "resp_durable"); err != nil || r.ID != "resp_durable" {
		t.Fatalf("the durable record after a restart: %+v %v", r, err)
	}
	if err := k.KeepDurable(ctx, "team:a", turnRecord("resp_durable", "", 1)); !errors.Is(err, ErrExists) {
		t.Fatalf("keeping the id again: %v, want ErrExists", err)
	}
}

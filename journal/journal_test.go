package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/testclock"
)

// stores are the two record stores the journal is written on.
func stores() []struct {
	name string
	open func(t *testing.T) store.Store
} {
	return []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"bolt", func(t *testing.T) store.Store {
			s, err := store.OpenBolt(t.TempDir(), store.BoltOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"redis", func(t *testing.T) store.Store {
			s, err := store.Open(config.Ratelimit{Store: "redis://" + redistest.Start(t).Addr + "/0"}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}

func entry(rid string) *Entry {
	return &Entry{RequestID: rid, Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini",
		Stream: true, EndUser: "u1", Tags: "env:prod", InputReserved: 120, SpendScopes: []string{"key:alpha/alpha-1", "team:alpha"},
		StartedMs: 1700000000000, Ticket: ratelimit.TicketState{ID: "t-" + rid, Lease: "l-" + rid, Tokens: 4216, Input: 120, Day: 20000,
			Charged: true, Counted: true, Scopes: []ratelimit.ScopeState{{ID: "key:alpha/alpha-1"}, {ID: "team:alpha", TokensPerMinute: 9000}}}}
}

// TestLeftoverAfterKill: the entries a replica admitted and never cleared are what its next
// life on the same store finds, whole, and only those: another replica finds none of them,
// cleared ones are gone, and Forget removes them.
func TestLeftoverAfterKill(t *testing.T) {
	for _, sk := range stores() {
		t.Run(sk.name, func(t *testing.T) {
			st := sk.open(t)
			ctx := context.Background()
			before := Open(st, "0123456789abcdef", nil)
			var hs []Handle
			for i := range 3 {
				h, err := before.Admit(ctx, entry(fmt.Sprint("r", i)))
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
			}
			before.Clear(hs[1])
			before.Close() // writes the clear; the two open calls stay, as after a kill

			other := Open(st, "fedcba9876543210", nil)
			defer other.Close()
			if left, err := other.Leftover(ctx); err != nil || len(left) != 0 {
				t.Fatalf("another replica's leftover: %v, %v", left, err)
			}
			after := Open(st, "0123456789abcdef", nil)
			defer after.Close()
			left, err := after.Leftover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Entry{}
			for _, l := range left {
				got[l.Entry.RequestID] = l.Entry
			}
			if len(left) != 2 || got["r0"].RequestID == "" || got["r2"].RequestID == "" {
				t.Fatalf("leftover %+v, want r0 and r2", left)
			}
			if want := *entry("r2"); fmt.Sprint(got["r2"]) != fmt.Sprint(want) {
				t.Errorf("read back %+v\nwant %+v", got["r2"], want)
			}
			if err := after.Forget(ctx, left); err != nil {
				t.Fatal(err)
			}
			if left, err := after.Leftover(ctx); err != nil || len(left) != 0 {
				t.Fatalf("after Forget: %v, %v", left, err)
			}
		})
	}
}

// gatedStore holds the first Batch until release is closed, and counts batches.
type gatedStore struct {
	store.Store
	batches atomic.Int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedStore) Batch(ctx context.Context, fn func(store.Tx) error) error {
	if g.batches.Add(1) == 1 {
		close(g.entered)
		<-g.release
	}
	return g.Store.Batch(ctx, fn)
}

// TestGroupCommit: admissions that arrive while a batch is being written share the next
// one: 1 + 64 admissions cost two batches, not 65.
func TestGroupCommit(t *testing.T) {
	for _, sk := range stores() {
		t.Run(sk.name, func(t *testing.T) {
			g := &gatedStore{Store: sk.open(t), entered: make(chan struct{}), release: make(chan struct{})}
			j := Open(g, "0123456789abcdef", nil)
			defer j.Close()
			ctx := context.Background()
			errs := make(chan error, 65)
			go func() { _, err := j.Admit(ctx, entry("first")); errs <- err }()
			<-g.entered
			for i := range 64 {
				go func() { _, err := j.Admit(ctx, entry(fmt.Sprint("r", i))); errs <- err }()
			}
			deadline := time.Now().Add(30 * time.Second)
			for j.waiting() < 64 {
				if time.Now().After(deadline) {
					t.Fatalf("%d admissions waiting, want 64", j.waiting())
				}
				time.Sleep(time.Millisecond)
			}
			close(g.release)
			for range 65 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if n := g.batches.Load(); n != 2 {
				t.Errorf("%d batches for 65 admissions, want 2", n)
			}
			left, err := j.Leftover(ctx)
			if err != nil || len(left) != 65 {
				t.Fatalf("%d entries written (%v), want 65", len(left), err)
			}
		})
	}
}

// waiting is how many admissions wait for the writer.
func (j *Journal) waiting() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.admits)
}

// TestClearWritesNothingItself: a settled call's clear adds no write to its request, and is
// written only once clearDelay has passed (the stores' flushes of what the call was charged
// are then behind it), with the next batch; Close writes those left.
func TestClearWritesNothingItself(t *testing.T) {
	g := &gatedStore{Store: stores()[0].open(t), entered: make(chan struct{}), release: make(chan struct{})}
	close(g.release)
	clock := testclock.At(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	j := open(g, "0123456789abcdef", nil, clock.Now)
	ctx := context.Background()
	admit := func(rid string) Handle {
		t.Helper()
		h, err := j.Admit(ctx, entry(rid))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	leftover := func() []string {
		t.Helper()
		left, err := j.Leftover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, l := range left {
			ids = append(ids, l.Entry.RequestID)
		}
		slices.Sort(ids)
		return ids
	}
	h0 := admit("r0")
	n := g.batches.Load()
	j.Clear(h0)
	if got := g.batches.Load(); got != n {
		t.Fatalf("Clear wrote a batch (%d, was %d)", got, n)
	}
	clock.Advance(clearDelay - time.Millisecond)
	h1 := admit("r1")
	if got := leftover(); !slices.Equal(got, []string{"r0", "r1"}) {
		t.Fatalf("before clearDelay: %v, want r0 r1", got)
	}
	clock.Advance(time.Millisecond)
	admit("r2")
	if got := leftover(); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("after clearDelay: %v, want r1 r2", got)
	}
	j.Clear(h1)
	j.Close()
	if got := leftover(); !slices.Equal(got, []string{"r2"}) {
		t.Fatalf("after Close: %v, want r2 (never cleared)", got)
	}
	if _, err := j.Admit(ctx, entry("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Admit after Close: %v, want ErrClosed", err)
	}
}

// failingStore fails every Batch.
type failingStore struct{ store.Store }

func (failingStore) Batch(context.Context, func(store.Tx) error) error {
	return errors.New("store down")
}

// TestAdmitFailureStillHandsAHandle: a failed write is reported, and its handle still names
// the entry, since a write whose outcome is unknown may have landed and must be cleared.
func TestAdmitFailureStillHandsAHandle(t *testing.T) {
	j := Open(failingStore{stores()[0].open(t)}, "0123456789abcdef", nil)
	defer j.Close()
	h, err := j.Admit(context.Background(), entry("r0"))
	if err == nil || h.key == "" {
		t.Fatalf("Admit on a failing store: %v, handle %q", err, h.key)
	}
	var nilJournal *Journal
	if h, err := nilJournal.Admit(context.Background(), entry("r0")); err != nil || h != (Handle{}) {
		t.Fatalf("nil journal: %v, %v", h, err)
	}
	nilJournal.Clear(h)
}

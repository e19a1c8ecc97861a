package calibration

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/store"
	"modelgate/store/storetest"
	"modelgate/testclock"
)

// slotClock is a test clock one hour into a slot, so an advance of whole slots lands at the
// same place in a later one whatever the hour the tests run at.
func slotClock() *testclock.Clock {
	start := slotOf(testclock.Origin()) * int64(slotLength/time.Second)
	return testclock.At(time.Unix(start, 0).Add(time.Hour))
}

func observe(tb *Table, model string, n int, estimated, reported int64) {
	for range n {
		tb.Observe("", model, estimated, reported)
	}
}

// slotBolt is a slotClock and a bbolt store on it, which closes with the test.
func slotBolt(t *testing.T) (*testclock.Clock, *store.Bolt) {
	t.Helper()
	clock := slotClock()
	st := storetest.OpenBolt(t, t.TempDir(), clock.Now)
	t.Cleanup(func() { st.Close() })
	return clock, st
}

// A sample counts once on its replica before, during and after its trip to the store.
func TestLocalSamplesCountOnce(t *testing.T) {
	clock, st := slotBolt(t)
	tb := New(st, clock.Now, nil)
	observe(tb, "m", 10, 100, 200)
	before := tb.Factor("", "m")
	if before.Samples != 10 {
		t.Fatalf("before the flush: %+v", before)
	}
	if err := tb.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := tb.Factor("", "m"); got != before {
		t.Errorf("flushed, not reloaded: %+v, want %+v", got, before)
	}
	apitest.SyncAll(t, tb, tb)
	if got := tb.Factor("", "m"); got != before {
		t.Errorf("after two syncs: %+v, want %+v", got, before)
	}
	observe(tb, "m", 10, 100, 200)
	apitest.SyncAll(t, tb)
	if got := tb.Factor("", "m"); got.Samples != 20 {
		t.Errorf("after more samples: %+v", got)
	}
}

// replicasOn opens a store of im on a clock at the start of a slot and returns a maker of
// replicas (Tables) over it: the ones a test starts first, and one started later.
func replicasOn(t *testing.T, im storetest.Backend) func() *Table {
	clock := slotClock()
	st := im.Open(t, clock.Now)
	return func() *Table { return New(st, clock.Now, nil) }
}

// Two replicas over one store learn from each other's samples, and concurrent adds lose
// none.
func TestReplicasShareSamples(t *testing.T) {
	for _, im := range storetest.Backends() {
		t.Run(im.Name, func(t *testing.T) {
			replica := replicasOn(t, im)
			a, b := replica(), replica()
			observe(a, "m", 30, 100, 200)
			observe(b, "m", 30, 100, 100)
			if got := b.Factor("", "m"); got.Samples != 30 || !near(got.Ratio, 1) {
				t.Fatalf("b before syncing: %+v", got)
			}
			apitest.SyncAll(t, a, b, a)
			want := Factor{Ratio: (90.0 + 4) / 64, Spread: 0.5 / 1.5, Samples: 60}
			for name, tb := range map[string]*Table{"a": a, "b": b} {
				if got := tb.Factor("", "m"); !near(got.Ratio, want.Ratio) || !near(got.Spread, want.Spread) || got.Samples != want.Samples {
					t.Errorf("%s = %+v, want %+v", name, got, want)
				}
			}

			// Both replicas observing and syncing at once.
			var wg sync.WaitGroup
			for _, tb := range []*Table{a, b} {
				wg.Add(2)
				go func() { defer wg.Done(); observe(tb, "m", 500, 100, 150) }()
				go func() {
					defer wg.Done()
					for range 20 {
						if err := tb.Sync(context.Background()); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			apitest.SyncAll(t, a, b, a)
			ga, gb := a.Factor("", "m"), b.Factor("", "m")
			if ga.Samples != 1060 || ga != gb {
				t.Errorf("after concurrent syncs: a %+v, b %+v, want 1060 samples on both", ga, gb)
			}
			// A replica started later (or restarted) learns it all at its first sync.
			c := replica()
			apitest.SyncAll(t, c)
			if gc := c.Factor("", "m"); gc != ga {
				t.Errorf("a new replica: %+v, want %+v", gc, ga)
			}
		})
	}
}

// A restarted process finds what it learned.
func TestRestartKeepsCalibration(t *testing.T) {
	clock := slotClock()
	dir := t.TempDir()
	st := storetest.OpenBolt(t, dir, clock.Now)
	tb := New(st, clock.Now, nil)
	observe(tb, "m", 20, 1000, 1300)
	observe(tb, "m", 20, 1000, 1100)
	before := tb.Factor("", "m")
	if err := tb.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = storetest.OpenBolt(t, dir, clock.Now)
	defer st.Close()
	again := New(st, clock.Now, nil)
	if got := again.Factor("", "m"); got.Samples != 0 {
		t.Fatalf("before the first sync: %+v", got)
	}
	apitest.SyncAll(t, again)
	if got := again.Factor("", "m"); !near(got.Ratio, before.Ratio) || !near(got.Spread, before.Spread) || got.Samples != 40 {
		t.Errorf("after the restart: %+v, want %+v", got, before)
	}
}

// Older slots weigh less: half at 12 hours, nothing past three days.
func TestDecayBySlotAge(t *testing.T) {
	for _, tc := range []struct {
		ageSlots int64
		weight   float64
		samples  int64
	}{
		{0, 1, 200},
		{1, math.Sqrt(0.5), 200},
		{2, 0.5, 200},
		{4, 0.25, 200},
		{keptSlots, 1.0 / 64, 200},
		{keptSlots + 1, 0, 100},
	} {
		t.Run(strconv.FormatInt(tc.ageSlots, 10), func(t *testing.T) {
			clock, st := slotBolt(t)
			tb := New(st, clock.Now, nil)
			observe(tb, "m", 100, 100, 200)
			apitest.SyncAll(t, tb)
			clock.Advance(time.Duration(tc.ageSlots) * slotLength)
			observe(tb, "m", 100, 100, 100)
			apitest.SyncAll(t, tb)
			w := tc.weight
			want := (100*2*w + 100 + 4) / (100*w + 100 + 4)
			if got := tb.Factor("", "m"); !near(got.Ratio, want) || got.Samples != tc.samples {
				t.Errorf("Factor = %+v, want ratio %v and %d samples", got, want, tc.samples)
			}
		})
	}
}

// A model whose tokenizer changes is learned anew within a day.
func TestRelearnedWithinADay(t *testing.T) {
	clock, st := slotBolt(t)
	tb := New(st, clock.Now, nil)
	hourly := func(hours int, reported int64) {
		for range hours {
			observe(tb, "m", 10, 1000, reported)
			apitest.SyncAll(t, tb)
			clock.Advance(time.Hour)
		}
	}
	hourly(48, 1000)
	if got := tb.Factor("", "m"); math.Abs(got.Ratio-1) > 1e-9 {
		t.Fatalf("settled: %+v", got)
	}
	hourly(24, 1500)
	t.Logf("a day after the change: %+v", tb.Factor("", "m"))
	if got := tb.Factor("", "m"); math.Abs(got.Ratio-1.5)/1.5 > 0.1 {
		t.Errorf("a day after the change: %+v, want within 10%% of 1.5", got)
	}
}

// failingStore refuses writes while fail is set.
type failingStore struct {
	store.Store
	fail atomic.Bool
}

func (f *failingStore) Add(ctx context.Context, bucket, key string, deltas map[string]int64, ttl time.Duration) error {
	if f.fail.Load() {
		return errors.New("store down")
	}
	return f.Store.Add(ctx, bucket, key, deltas, ttl)
}

// A failed write keeps its samples, counted once, for the next one.
func TestFailedFlushKeepsSamples(t *testing.T) {
	clock := slotClock()
	bolt := storetest.OpenBolt(t, t.TempDir(), clock.Now)
	defer bolt.Close()
	st := &failingStore{Store: bolt}
	st.fail.Store(true)
	tb := New(st, clock.Now, nil)
	observe(tb, "m", 5, 100, 200)
	if err := tb.Sync(context.Background()); err == nil {
		t.Fatal("the write failed, Sync did not say so")
	}
	if got := tb.Factor("", "m"); got.Samples != 5 {
		t.Errorf("after the failed write: %+v", got)
	}
	st.fail.Store(false)
	apitest.SyncAll(t, tb, tb)
	if got := tb.Factor("", "m"); got.Samples != 5 {
		t.Errorf("after the retry: %+v", got)
	}
	var stored int64
	err := bolt.ScanCounters(context.Background(), bucket, "", func(_ string, c map[string]int64) error {
		stored += c["n"]
		return nil
	})
	if err != nil || stored != 5 {
		t.Errorf("the store holds %d samples (%v), want 5", stored, err)
	}
}

// A full table takes a new model once the samples of an old one have expired.
func TestFullTableGivesWay(t *testing.T) {
	clock, st := slotBolt(t)
	tb := New(st, clock.Now, nil)
	for i := range MaxModels {
		tb.Observe("", "old-"+strconv.Itoa(i), 100, 200)
	}
	apitest.SyncAll(t, tb)
	tb.Observe("", "new", 100, 200)
	if got := tb.Factor("", "new"); got.Samples != 0 {
		t.Fatalf("calibrated beyond the bound: %+v", got)
	}
	clock.Advance(time.Duration(keptSlots+2) * slotLength)
	apitest.SyncAll(t, tb)
	if n := len(tb.Models()); n != 0 {
		t.Fatalf("%d models kept after their samples expired", n)
	}
	tb.Observe("", "new", 100, 200)
	if got := tb.Factor("", "new"); got.Samples != 1 {
		t.Errorf("after the old models gave way: %+v", got)
	}
}

// An Observe that looked its model up just before a reload dropped the entry (all its
// samples expired) does not add to the dropped entry, whose samples nobody would read: it
// looks again.
func TestObserveRacingADrop(t *testing.T) {
	clock, st := slotBolt(t)
	tb := New(st, clock.Now, nil)
	tb.Observe("", "m", 100, 200)
	apitest.SyncAll(t, tb)
	clock.Advance(time.Duration(keptSlots+2) * slotLength)
	found := tb.model("m", true) // Observe's lookup
	apitest.SyncAll(t, tb)       // the reload drops the entry
	if found.add("", sums{n: 1, r: 2 * micro, r2: 4 * micro}) {
		t.Fatal("a sample was added to an entry the table no longer holds")
	}
	tb.Observe("", "m", 100, 200)
	if got := tb.Factor("", "m"); got.Samples != 1 {
		t.Errorf("after the drop: %+v", got)
	}
}

// A replica takes in the models other replicas calibrate, the best-known first, up to the
// bound.
func TestReloadTakesInModelsUpToTheBound(t *testing.T) {
	clock, st := slotBolt(t)
	a, b := New(st, clock.Now, nil), New(st, clock.Now, nil)
	for i := range MaxModels {
		n := 1
		if i >= MaxModels-10 {
			n = 5
		}
		observe(a, "model-"+strconv.Itoa(i), n, 100, 200)
	}
	b.Observe("", "own", 100, 150)
	apitest.SyncAll(t, a, b)
	got := b.Models()
	if len(got) != MaxModels {
		t.Fatalf("b calibrates %d models, want %d", len(got), MaxModels)
	}
	for i := MaxModels - 10; i < MaxModels; i++ {
		if f := b.Factor("", "model-"+strconv.Itoa(i)); f.Samples != 5 {
			t.Errorf("model-%d, among the best known, on b: %+v", i, f)
		}
	}
	if f := b.Factor("", "own"); f.Samples != 1 {
		t.Errorf("b's own model: %+v", f)
	}
}

func TestParseKey(t *testing.T) {
	long := string(make([]byte, MaxModelLen+1))
	for _, tc := range []struct {
		key         string
		slot        int64
		team, model string
		ok          bool
	}{
		{recordKey(81234, "search", "gpt-4o-mini"), 81234, "search", "gpt-4o-mini", true},
		{recordKey(81234, "", "gpt-4o-mini"), 81234, "", "gpt-4o-mini", true},
		{"81234|t|a|b", 81234, "t", "a|b", true},
		{"81234|gpt-4o-mini", 0, "", "", false}, // a record of the bucket before teams
		{"81234|t|", 0, "", "", false},
		{"81234|", 0, "", "", false},
		{"|t|m", 0, "", "", false},
		{"-5|t|m", 0, "", "", false},
		{"12a|t|m", 0, "", "", false},
		{"9999999999999|t|m", 0, "", "", false},
		{"no separator", 0, "", "", false},
		{"1|" + strings.Repeat("t", MaxTeamLen+1) + "|m", 0, "", "", false},
		{"1|t|" + long, 0, "", "", false},
	} {
		slot, team, model, ok := parseKey(tc.key)
		if slot != tc.slot || team != tc.team || model != tc.model || ok != tc.ok {
			t.Errorf("parseKey(%q) = %d, %q, %q, %v; want %d, %q, %q, %v", tc.key, slot, team, model, ok, tc.slot, tc.team, tc.model, tc.ok)
		}
	}
}

// Run writes samples every interval, and a last time when it stops.
func TestRun(t *testing.T) {
	clock, st := slotBolt(t)
	a, b := New(st, clock.Now, nil), New(st, clock.Now, nil)
	samplesOnB := func() int64 {
		apitest.SyncAll(t, b)
		return b.Factor("", "m").Samples
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx, 5*time.Millisecond); close(done) }()
	observe(a, "m", 3, 100, 200)
	deadline := time.Now().Add(5 * time.Second)
	for samplesOnB() != 3 {
		if time.Now().After(deadline) {
			t.Fatal("Run never wrote the samples")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done

	// An interval that never comes: only the last write on the way out carries samples.
	ctx, cancel = context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { a.Run(ctx, time.Hour); close(done) }()
	observe(a, "m", 4, 100, 200)
	cancel()
	<-done
	if got := samplesOnB(); got != 7 {
		t.Errorf("after Run stopped, b sees %d samples, want 7", got)
	}
}

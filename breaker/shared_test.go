package breaker

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/apitest"
	"modelgate/redisconn/redistest"
	"modelgate/store"
)

// replicas are two Sets over one store, as two processes would be.
func replicas(t *testing.T, st store.Store, now func() time.Time, cfg Settings) (*Set, *Set) {
	t.Helper()
	return New(Options{Settings: cfg, Store: st, Now: now}), New(Options{Settings: cfg, Store: st, Now: now})
}

// boltReplicas are two replicas with testSettings over one bbolt store on the clock now,
// which closes with the test.
func boltReplicas(t *testing.T, now func() time.Time) (*Set, *Set) {
	t.Helper()
	st, err := store.OpenBolt(t.TempDir(), store.BoltOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return replicas(t, st, now, testSettings)
}

// On one bbolt store with an injected clock: failures from both replicas add up, the
// breaker one opened is open on the other, one probe goes across both, and its success
// closes the breaker on both.
func TestReplicasShareOnBolt(t *testing.T) {
	clk := newClock()
	r1, r2 := boltReplicas(t, clk.Now)
	apitest.SyncAll(t, r1, r2)
	r1.Report("model:m", true)
	r2.Report("model:m", true)
	if !r1.Allow("model:m") {
		t.Fatal("open after 2 of 3 failures")
	}
	r2.Report("model:m", true) // the third, counted across replicas
	if r2.Allow("model:m") {
		t.Fatal("replica 2 did not open on the shared count")
	}
	apitest.SyncAll(t, r1)
	if r1.Allow("model:m") {
		t.Fatal("replica 1 does not see the breaker replica 2 opened")
	}
	for r, want := range map[*Set]string{r1: OpenedByReplica, r2: OpenedByFailures} {
		for _, st := range r.Statuses() {
			if st.OpenedBy != want {
				t.Errorf("opened by %q, want %q", st.OpenedBy, want)
			}
		}
	}
	clk.Advance(testSettings.Cooldown)
	got1, got2 := r1.Allow("model:m"), r2.Allow("model:m")
	if got1 == got2 {
		t.Fatalf("probes: replica 1 %v, replica 2 %v; want exactly one", got1, got2)
	}
	prober, other := r1, r2
	if got2 {
		prober, other = r2, r1
	}
	clk.Advance(2 * recheck)
	if other.Allow("model:m") {
		t.Fatal("a second probe went while the first is out")
	}
	prober.Report("model:m", false)
	if !prober.Allow("model:m") {
		t.Fatal("the prober's breaker did not close")
	}
	apitest.SyncAll(t, other)
	if !other.Allow("model:m") || stateOf(other, "model:m") != Closed {
		t.Fatal("the other replica did not learn that the breaker closed")
	}
	// The failures that opened it are gone: it takes N new ones to open it again.
	r1.Report("model:m", true)
	if !r1.Allow("model:m") {
		t.Fatal("one failure re-opened a breaker just closed")
	}
}

// A failed probe re-opens the breaker for the doubled cool-down at the store too: the
// other replica cannot probe before it ends.
func TestFailedProbeSharedOnBolt(t *testing.T) {
	clk := newClock()
	r1, r2 := boltReplicas(t, clk.Now)
	for range testSettings.Failures {
		r1.Report("key:k1", true)
	}
	apitest.SyncAll(t, r2)
	clk.Advance(testSettings.Cooldown)
	if !r1.Allow("key:k1") {
		t.Fatal("no probe after the cool-down")
	}
	r1.Report("key:k1", true)
	clk.Advance(testSettings.Cooldown + time.Second)
	if r2.Allow("key:k1") || r1.Allow("key:k1") {
		t.Fatal("a probe went before the doubled cool-down ended")
	}
	clk.Advance(testSettings.Cooldown)
	if !r2.Allow("key:k1") {
		t.Fatal("replica 2 could not probe after the doubled cool-down")
	}
}

// On Redis (real time: its TTLs run on its own clock) two replicas share one breaker and
// one probe. Skipped without redis-server.
func TestReplicasShareOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	st := store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr}))
	defer st.Close()
	cfg := Settings{Failures: 2, Window: time.Minute, Cooldown: 300 * time.Millisecond, MaxCooldown: time.Second}
	r1, r2 := replicas(t, st, time.Now, cfg)
	apitest.SyncAll(t, r1, r2)
	r1.Report("model:m", true)
	r2.Report("model:m", true)
	apitest.SyncAll(t, r1, r2)
	if r1.Allow("model:m") || r2.Allow("model:m") {
		t.Fatal("the breaker is not open on both replicas")
	}
	// Poll (bounded) until one replica gets the probe once the cool-down has expired at Redis.
	deadline := time.Now().Add(5 * time.Second)
	var prober, other *Set
	for prober == nil && time.Now().Before(deadline) {
		a, b := r1.Allow("model:m"), r2.Allow("model:m")
		if a && b {
			t.Fatal("both replicas probed at once")
		}
		switch {
		case a:
			prober, other = r1, r2
		case b:
			prober, other = r2, r1
		default:
			time.Sleep(20 * time.Millisecond) // polling Redis's clock, not standing in for a condition
		}
	}
	if prober == nil {
		t.Fatal("no probe within 5s of a 300ms cool-down")
	}
	for range 20 {
		if other.Allow("model:m") {
			t.Fatal("a second probe went while the first is out")
		}
	}
	prober.Report("model:m", false)
	apitest.SyncAll(t, other)
	if !other.Allow("model:m") || !prober.Allow("model:m") {
		t.Fatal("the probe's success did not close the breaker on both replicas")
	}
}

// FuzzParseRecord: a state record from the store (any replica, any version) is read back
// or refused, never a panic or a non-positive cool-down.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte("30000 1764115200000"))
	f.Add([]byte("x y"))
	f.Add([]byte("-1 0"))
	f.Fuzz(func(t *testing.T, v []byte) {
		if cd, _, ok := parseRecord(v); ok && cd <= 0 {
			t.Fatalf("cool-down %v accepted from %q", cd, v)
		}
	})
}

// A replica that counts a failure past the threshold while another replica's probe is out
// opens its own view only: it must not restart the cool-down at the store, which would let
// a second probe go beside the first.
func TestLateFailureKeepsTheProbeSingle(t *testing.T) {
	clk := newClock()
	r1, r2 := boltReplicas(t, clk.Now)
	for range testSettings.Failures {
		r1.Report("model:m", true)
	}
	clk.Advance(testSettings.Cooldown)
	if !r1.Allow("model:m") {
		t.Fatal("no probe after the cool-down")
	}
	r2.Report("model:m", true) // a call r2 let through before it learned of the breaker
	if r2.Allow("model:m") {
		t.Fatal("replica 2 let a call through after the shared count passed the threshold")
	}
	clk.Advance(testSettings.Cooldown)
	if r2.Allow("model:m") {
		t.Fatal("a second probe went while replica 1's is out")
	}
}

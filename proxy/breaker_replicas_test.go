package proxy

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/breaker"
	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/testclock"
)

// Two replicas share a model breaker through one record store: failures on both add up,
// the breaker one opens fails calls fast on the other, one probe goes across both under
// load, and its success closes the breaker on both. On bbolt (two in-process replicas on
// one file, an injected clock) and on Redis (real time: Redis expires the cool-down by its
// own clock; skipped without redis-server).
func TestModelBreakerSharedByReplicas(t *testing.T) {
	const cooldown = 300 * time.Millisecond
	cases := []struct {
		name  string
		start func(t *testing.T) (st store.Store, now func() time.Time, advance func(time.Duration))
	}{
		{"bolt", func(t *testing.T) (store.Store, func() time.Time, func(time.Duration)) {
			clk := testclock.At(testclock.Origin())
			return tempBolt(t, store.BoltOptions{Now: clk.Now}), clk.Now, clk.Advance
		}},
		{"redis", func(t *testing.T) (store.Store, func() time.Time, func(time.Duration)) {
			st := store.NewRedis(redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr}))
			t.Cleanup(func() { st.Close() })
			return st, time.Now, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, now, advance := tc.start(t)
			flaky := &flakyPlatform{}
			var sets []*breaker.Set
			var envs []*testEnv
			for range 2 {
				set := breaker.New(breaker.Options{Store: st, Now: now,
					Settings: breaker.Settings{Failures: 3, Window: time.Minute, Cooldown: cooldown, MaxCooldown: time.Second}})
				sets = append(sets, set)
				envs = append(envs, startEnv(t, envOptions{upstream: flaky, breakers: set}))
			}
			// Each replica holds its own platform key, which only its own sim accepts.
			flaky.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, env := range envs {
					if r.Header.Get("Authorization") == "Bearer "+env.canary {
						env.sim.ServeHTTP(w, r)
						return
					}
				}
				http.Error(w, "unknown key", http.StatusUnauthorized)
			})
			body := breakerRoutes[0].body(false)
			call := func(env *testEnv) int {
				status, _, _ := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body)
				return status
			}
			syncAll := func() {
				for _, s := range sets {
					if err := s.Sync(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
			}

			flaky.failing.Store(true)
			for _, env := range []*testEnv{envs[0], envs[1], envs[0]} {
				if got := call(env); got != http.StatusInternalServerError {
					t.Fatalf("failure: %d", got)
				}
			}
			syncAll()
			for range 4 {
				for i, env := range envs {
					if got := call(env); got != http.StatusServiceUnavailable {
						t.Fatalf("replica %d with the breaker open: %d", i+1, got)
					}
				}
			}
			if n := flaky.calls.Load(); n != 3 {
				t.Fatalf("the platform saw %d calls, want the 3 failures only", n)
			}

			flaky.failing.Store(false)
			flaky.hold = make(chan struct{})
			var release sync.Once
			releaseHeld := func() { release.Do(func() { close(flaky.hold) }) }
			// A failed check below must not leave the held call, and the test, hanging.
			t.Cleanup(releaseHeld)
			if advance != nil {
				advance(cooldown)
			} else {
				// Redis ends the cool-down by expiring its claim: wait for that, bounded.
				deadline := time.Now().Add(5 * time.Second)
				for {
					_, err := st.Get(context.Background(), "breaker_probe", "model:sim-chat")
					if errors.Is(err, store.ErrNotFound) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the cool-down did not end at Redis: %v", err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			const perReplica = 12
			statuses := make(chan int, 2*perReplica)
			var wg sync.WaitGroup
			for _, env := range envs {
				for range perReplica {
					wg.Go(func() { statuses <- call(env) })
				}
			}
			// The refused calls may all be answered while the probe is still on its way to the
			// platform: wait for both.
			deadline := time.Now().Add(10 * time.Second)
			for (len(statuses) < 2*perReplica-1 || flaky.waiting.Load() < 1) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := flaky.waiting.Load(); got != 1 || len(statuses) != 2*perReplica-1 {
				t.Fatalf("%d calls at the platform, %d answered; want 1 probe across both replicas", got, len(statuses))
			}
			releaseHeld()
			wg.Wait()
			close(statuses)
			ok := 0
			for s := range statuses {
				if s == http.StatusOK {
					ok++
				}
			}
			if ok != 1 {
				t.Fatalf("%d calls succeeded during the probe, want the probe alone", ok)
			}
			syncAll()
			for i, env := range envs {
				if got := call(env); got != http.StatusOK {
					t.Fatalf("replica %d after the probe closed the breaker: %d", i+1, got)
				}
			}
		})
	}
}

package stored

import (
	"context"
	"testing"
	"time"

	"modelgate/redisconn/redistest"
)

// TestClaimsExpireUnrenewed: a claim names its runner while it is renewed and is gone once
// its lease ran out, on both stores (bbolt by the injected clock, Redis by key expiry).
func TestClaimsExpireUnrenewed(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	k := newKeeper(t, boltStore(t, clk.Now), time.Hour, 0, clk.Now, false)
	if err := k.Claim(ctx, "team:a", "resp_1", "mg_one", time.Minute); err != nil {
		t.Fatal(err)
	}
	if r, err := k.Runner(ctx, "team:a", "resp_1"); err != nil || r != "mg_one" {
		t.Fatalf("runner: %q %v", r, err)
	}
	if r, _ := k.Runner(ctx, "team:b", "resp_1"); r != "" {
		t.Errorf("another owner sees the claim: %q", r)
	}
	clk.Advance(50 * time.Second)
	if err := k.Claim(ctx, "team:a", "resp_1", "mg_one", time.Minute); err != nil { // renewed
		t.Fatal(err)
	}
	clk.Advance(50 * time.Second)
	if r, _ := k.Runner(ctx, "team:a", "resp_1"); r != "mg_one" {
		t.Errorf("a renewed claim expired: %q", r)
	}
	clk.Advance(11 * time.Second)
	if r, _ := k.Runner(ctx, "team:a", "resp_1"); r != "" {
		t.Errorf("an unrenewed claim is still live: %q", r)
	}

	rk := newKeeper(t, redisStore(t, redistest.Start(t).Addr), time.Hour, 0, nil, false)
	if err := rk.Claim(ctx, "team:a", "resp_1", "mg_two", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if r, _ := rk.Runner(ctx, "team:a", "resp_1"); r != "mg_two" {
		t.Errorf("redis runner: %q", r)
	}
	if err := rk.Release(ctx, "team:a", "resp_1"); err != nil {
		t.Fatal(err)
	}
	if r, _ := rk.Runner(ctx, "team:a", "resp_1"); r != "" {
		t.Errorf("released claim still live: %q", r)
	}
}

// TestReapOrphansEndsOnlyDeadRunnersUnfinishedRecords: records of dead runners that are
// still unfinished are ended; a finished one is left as it is; a live runner's is untouched.
func TestReapOrphansEndsOnlyDeadRunnersUnfinishedRecords(t *testing.T) {
	ctx := context.Background()
	eachMode(t, func(t *testing.T, behind bool) {
		k := newKeeper(t, boltStore(t, nil), time.Hour, 0, nil, behind)
		for _, c := range []struct{ id, status, runner string }{
			{"resp_dead", StatusInProgress, "mg_old"},
			{"resp_dead_queued", StatusQueued, "mg_old"},
			{"resp_dead_done", StatusCompleted, "mg_old"},
			{"resp_live", StatusInProgress, "mg_now"},
		} {
			if err := k.Claim(ctx, "team:a", c.id, c.runner, 0); err != nil {
				t.Fatal(err)
			}
			if err := k.Keep(ctx, "team:a", &Record{ID: c.id, Status: c.status, Response: []byte(`{"status":"` + c.status + `"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		n, err := k.ReapOrphans(ctx, func(inst string) bool { return inst != "mg_now" }, func(r *Record) { r.Status = StatusFailed })
		if err != nil || n != 2 {
			t.Fatalf("reaped %d: %v", n, err)
		}
		for id, want := range map[string]string{"resp_dead": StatusFailed, "resp_dead_queued": StatusFailed, "resp_dead_done": StatusCompleted, "resp_live": StatusInProgress} {
			r, err := k.Get(ctx, "team:a", id)
			if err != nil || r.Status != want {
				t.Errorf("%s: %+v %v, want %s", id, r, err, want)
			}
			runner, _ := k.Runner(ctx, "team:a", id)
			if (runner != "") != (id == "resp_live") {
				t.Errorf("%s claimed by %q after the reap", id, runner)
			}
		}
	})
}

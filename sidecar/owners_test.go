package sidecar

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/testclock"
)

// ownerKinds are the places owners are kept, each on clock c: memory, the embedded store
// and Redis (skipped locally without redis-server).
func ownerKinds() []struct {
	name string
	make func(t *testing.T, c *testclock.Clock) Owners
} {
	return []struct {
		name string
		make func(t *testing.T, c *testclock.Clock) Owners
	}{
		{"memory", func(t *testing.T, c *testclock.Clock) Owners { return MemoryOwners(c.Now) }},
		{"bolt", func(t *testing.T, c *testclock.Clock) Owners {
			b, err := store.OpenBolt(t.TempDir(), store.BoltOptions{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return StoreOwners(b)
		}},
		{"redis", func(t *testing.T, c *testclock.Clock) Owners {
			rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
			t.Cleanup(func() { rdb.Close() })
			return StoreOwners(store.NewRedis(rdb))
		}},
	}
}

// TestOwners: a record answers until its time is up, with or without a key fingerprint, and
// a non-positive lifetime removes it.
func TestOwners(t *testing.T) {
	for _, k := range ownerKinds() {
		t.Run(k.name, func(t *testing.T) {
			c := testclock.New()
			o := k.make(t, c)
			ctx := context.Background()
			if err := o.PutOwner(ctx, "asset-1", Owner{Team: "search", KeyFingerprint: "0a1b2c3d"}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := o.PutOwner(ctx, "asset-3", Owner{Team: "vision"}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := o.Owner(ctx, "asset-1"); err != nil || !ok || got != (Owner{"search", "0a1b2c3d"}) {
				t.Fatalf("Owner = %+v %v %v", got, ok, err)
			}
			if got, ok, err := o.Owner(ctx, "asset-3"); err != nil || !ok || got != (Owner{Team: "vision"}) {
				t.Fatalf("Owner without a key = %+v %v %v", got, ok, err)
			}
			if _, ok, _ := o.Owner(ctx, "asset-2"); ok {
				t.Fatal("unknown asset has an owner")
			}
			if err := o.PutOwner(ctx, "asset-3", Owner{Team: "vision"}, 0); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := o.Owner(ctx, "asset-3"); ok {
				t.Fatal("a record written with no lifetime left still answers")
			}
			if k.name == "redis" {
				return // Redis expires by its own clock; see TestRedisOwnerExpiryIsRelative
			}
			c.Advance(time.Hour)
			if _, ok, _ := o.Owner(ctx, "asset-1"); ok {
				t.Fatal("expired record still answers")
			}
		})
	}
}

// TestRestartKeepsOwners: asset ownership in the embedded store survives a restart.
func TestRestartKeepsOwners(t *testing.T) {
	dir := t.TempDir()
	c := testclock.New()
	ctx := context.Background()
	b, err := store.OpenBolt(dir, store.BoltOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := StoreOwners(b).PutOwner(ctx, "asset-9", Owner{Team: "vision", KeyFingerprint: "ffee0011"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b, err = store.OpenBolt(dir, store.BoltOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if o, ok, err := StoreOwners(b).Owner(ctx, "asset-9"); err != nil || !ok || o != (Owner{"vision", "ffee0011"}) {
		t.Fatalf("Owner after restart = %+v %v %v", o, ok, err)
	}
}

// TestRedisOwnerExpiryIsRelative: Redis expires keys by its own clock, so an owner record is
// sent with how long it lives, never until when, and replicas sharing the server agree on
// it. Whatever the injected clock says (hours behind or days ahead of Redis's), the record
// lives its hour on Redis.
func TestRedisOwnerExpiryIsRelative(t *testing.T) {
	addr := redistest.Start(t).Addr
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	for _, skew := range []time.Duration{-3 * time.Hour, 30 * 24 * time.Hour} {
		c := testclock.At(time.Now().Add(skew))
		r := New(Deps{Owners: StoreOwners(store.NewRedis(rdb)), Now: c.Now})
		otherClient := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { otherClient.Close() })
		other := StoreOwners(store.NewRedis(otherClient))
		asset := "asset_skew_" + strings.NewReplacer("-", "m", ".", "_").Replace(skew.String())
		call := &Call{RequestID: "req_1", Team: "t"}
		expires := c.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		body := []byte(`{"code":0,"msg":"success","data":{"asset_id":"` + asset + `","expires_at":"` + expires + `"}}`)
		if _, ok := r.recordOwner(ctx, call, "0a1b", body, defaultAssetTTL); !ok {
			t.Fatalf("skew %v: owner not recorded", skew)
		}
		if o, ok, err := other.Owner(ctx, asset); err != nil || !ok || o != (Owner{"t", "0a1b"}) {
			t.Fatalf("skew %v: owner from the other replica = %+v %v %v", skew, o, ok, err)
		}
		keys, err := rdb.Keys(ctx, "*"+asset+"*").Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("skew %v: keys %v %v", skew, keys, err)
		}
		if ttl, err := rdb.PTTL(ctx, keys[0]).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
			t.Fatalf("skew %v: Redis TTL %v (%v), want the record's hour", skew, ttl, err)
		}
	}
}

// FuzzOwnerRecord: whatever a stored owner record holds, decoding does not fail, and a record
// written by encode reads back as written (team names cannot hold a NUL; config forbids it).
func FuzzOwnerRecord(f *testing.F) {
	f.Add("search", "0a1b2c3d")
	f.Add("vision", "")
	f.Add("", "")
	f.Add("a\x00b", "c")
	f.Fuzz(func(t *testing.T, team, fp string) {
		_ = decodeOwner([]byte(team + fp))
		if strings.Contains(team, "\x00") || strings.Contains(fp, "\x00") {
			return
		}
		o := Owner{Team: team, KeyFingerprint: fp}
		if got := decodeOwner(o.encode()); got != o {
			t.Fatalf("round trip of %+v gave %+v", o, got)
		}
	})
}

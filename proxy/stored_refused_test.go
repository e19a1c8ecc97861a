package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/store"
	"modelgate/stored"
)

// refusingStore refuses the record writes of stored responses (Create, Put, Batch) while
// refusing is set, as a Redis that is down or out of memory does; reads pass. Not a
// *store.Bolt, so the keeper over it works as over a shared store: each record written
// before its answer.
type refusingStore struct {
	store.Store
	refusing atomic.Bool
}

var errRefusedWrite = errors.New("OOM command not allowed when used memory > 'maxmemory'")

func (s *refusingStore) Create(ctx context.Context, b, k string, v []byte, ttl time.Duration) (bool, error) {
	if s.refusing.Load() {
		return false, errRefusedWrite
	}
	return s.Store.Create(ctx, b, k, v, ttl)
}

func (s *refusingStore) Put(ctx context.Context, b, k string, v []byte, ttl time.Duration) error {
	if s.refusing.Load() {
		return errRefusedWrite
	}
	return s.Store.Put(ctx, b, k, v, ttl)
}

func (s *refusingStore) Batch(ctx context.Context, fn func(store.Tx) error) error {
	if s.refusing.Load() {
		return errRefusedWrite
	}
	return s.Store.Batch(ctx, fn)
}

// TestStoredResponsesWhileASharedStoreRefuses: on a shared store that refuses writes, every
// stored response answered 200 is held and readable (GET, previous_response_id) until it is
// written; once the held memory is full, store-on calls get 503 with Retry-After before
// reaching the platform; /readyz says degraded; when the store takes writes again every id
// is in it.
func TestStoredResponsesWhileASharedStoreRefuses(t *testing.T) {
	st := &refusingStore{Store: tempBolt(t, store.BoltOptions{})}
	env := startEnv(t, envOptions{store: st, heldResponses: 16 << 10, heldRetry: 20 * time.Millisecond})
	st.refusing.Store(true)
	padding := strings.Repeat("0", 800)
	var ids []string
	parent := ""
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("the held memory never filled")
		}
		prev := ""
		if parent != "" {
			prev = `,"previous_response_id":"` + parent + `"`
		}
		before := len(env.sim.Requests())
		status, h, b := env.do(t, "POST", "/v1/responses", keyAlpha1,
			[]byte(fmt.Sprintf(`{"model":"gpt-4o-mini","input":"turn %d %s"%s}`, i, padding, prev)))
		if status == 503 {
			if len(env.sim.Requests()) != before || gjson.GetBytes(b, "error.code").Str != "store_unavailable" {
				t.Errorf("the refusal: %s (platform calls %d -> %d)", b, before, len(env.sim.Requests()))
			}
			if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("Retry-After %q", h.Get("Retry-After"))
			}
			break
		}
		if status != 200 {
			t.Fatalf("turn %d: %d %s", i, status, b)
		}
		parent = gjson.GetBytes(b, "id").Str
		ids = append(ids, parent)
	}
	for _, id := range ids {
		if status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil); status != 200 {
			t.Fatalf("GET %s while held: %d %s", id, status, b)
		}
	}
	if _, _, b := env.do(t, "GET", "/readyz", "", nil); !gjson.GetBytes(b, "degraded").Bool() {
		t.Errorf("/readyz while the store refuses: %s", b)
	}
	st.refusing.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for n, _ := env.server.keeper.Held(); n > 0; n, _ = env.server.keeper.Held() {
		if time.Now().After(deadline) {
			t.Fatalf("%d records still held 30 s after the store recovered", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Read from the store alone: a keeper of its own holds nothing.
	fresh := stored.NewKeeper(st.Store, stored.Options{TTL: time.Hour})
	for _, id := range ids {
		if _, err := fresh.Get(context.Background(), "team:alpha", id); err != nil {
			t.Errorf("%s not in the store after it recovered: %v", id, err)
		}
	}
	if _, _, b := env.do(t, "GET", "/readyz", "", nil); gjson.GetBytes(b, "degraded").Exists() {
		t.Errorf("/readyz after the store recovered: %s", b)
	}
}

//go:build linux

package proxy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/store"
	"modelgate/store/storetest"
	"modelgate/stored"
)

// TestStoredResponsesOnAFullDisk: with the embedded store's disk full (a real tmpfs, filled),
// no answer is a 200 whose id later 404s. Responses answered while the store refuses writes
// are held in memory and read from there (GET and previous_response_id); once that memory is
// full, calls with store on are refused with 503 and Retry-After before they reach the
// platform, while store: false calls still pass; /readyz stays 200 and says degraded, and
// the failures are counted. When space returns every held record is written: each id is
// read back, from this server and from the disk alone.
func TestStoredResponsesOnAFullDisk(t *testing.T) {
	dir := apitest.SmallDisk(t, 4<<20)
	st, err := store.OpenBolt(dir, store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	env := startEnv(t, envOptions{store: st, heldResponses: 32 << 10, heldRetry: 20 * time.Millisecond})
	health := env.server.writes
	// About a kilobyte per turn, so the held memory fills in a few dozen calls.
	padding := strings.Repeat("0", 800)

	first := turn(t, env, keyAlpha1, `{"model":"gpt-4o-mini","input":"before the disk filled"}`)
	env.server.keeper.Flush()
	filler := apitest.FillDisk(t, dir)

	var ids []string
	parent := first
	refused := false
	for i := 0; i < 1000 && !refused; i++ {
		body := fmt.Sprintf(`{"model":"gpt-4o-mini","input":"turn %d %s","previous_response_id":%q}`, i, padding, parent)
		before := len(env.sim.Requests())
		status, h, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body))
		switch status {
		case 200:
			id := gjson.GetBytes(b, "id").Str
			ids, parent = append(ids, id), id
			env.server.keeper.Flush() // its write tried (and refused) before the next call
		case 503:
			refused = true
			if got := len(env.sim.Requests()); got != before {
				t.Errorf("a refused call reached the platform (%d requests, was %d)", got, before)
			}
			if gjson.GetBytes(b, "error.code").Str != "store_unavailable" || gjson.GetBytes(b, "error.type").Str == "" {
				t.Errorf("refusal not in OpenAI's shape: %s", b)
			}
			if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("Retry-After %q", h.Get("Retry-After"))
			}
		default:
			t.Fatalf("call %d while the disk is full: %d %s", i, status, b)
		}
	}
	t.Logf("%d calls answered while the disk was full, then refused", len(ids))
	if !refused || len(ids) < 2 {
		t.Fatalf("%d calls answered and refused=%v: the held memory never filled", len(ids), refused)
	}
	// Not necessarily all of them: bbolt may still fit a small batch into pages its file
	// freed before the disk filled.
	if n, _ := env.server.keeper.Held(); n == 0 || n > len(ids) {
		t.Fatalf("%d records held, want some of the %d answered since the disk filled", n, len(ids))
	}
	// Store off needs no record: served.
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"gpt-4o-mini","input":"x","store":false}`)); status != 200 {
		t.Errorf("store: false while full: %d %s", status, b)
	}
	// Every id answered is readable now, from memory.
	for _, id := range ids {
		if status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil); status != 200 {
			t.Fatalf("GET %s while held: %d %s", id, status, b)
		}
	}
	status, _, b := env.do(t, "GET", "/readyz", "", nil)
	if status != 200 || gjson.GetBytes(b, "status").Str != "ready" || !gjson.GetBytes(b, "degraded").Bool() ||
		gjson.GetBytes(b, "reason").Str == "" {
		t.Errorf("/readyz while the disk is full: %d %s", status, b)
	}
	if storetest.WriteFailures(health, store.WriterResponses) == 0 {
		t.Error("no responses write failure counted")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n, _ := env.server.keeper.Held(); n > 0; n, _ = env.server.keeper.Held() {
		if time.Now().After(deadline) {
			t.Fatalf("%d records still held 30 s after the space returned", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	status, _, b = env.do(t, "GET", "/readyz", "", nil)
	if status != 200 || gjson.GetBytes(b, "degraded").Exists() {
		t.Errorf("/readyz after the space returned: %d %s", status, b)
	}
	turn(t, env, keyAlpha1, `{"model":"gpt-4o-mini","input":"after","previous_response_id":"`+parent+`"}`)
	env.server.keeper.Flush()
	// Read from the disk alone: a keeper of its own, its index rebuilt from the store.
	fresh := stored.NewKeeper(st, stored.Options{TTL: time.Hour, WriteBehind: true})
	if err := fresh.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range append([]string{first}, ids...) {
		if _, err := fresh.Get(context.Background(), "team:alpha", id); err != nil {
			t.Errorf("%s from the disk after the space returned: %v", id, err)
		}
		if status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil); status != 200 {
			t.Errorf("GET %s after the space returned: %d %s", id, status, b)
		}
	}
}

// TestStoredResponsesWhileASharedStoreRefuses: on a shared store that refuses writes, every
// stored response answered 200 is held and readable (GET, previous_response_id) until it is
// written; once the held memory is full, store-on calls get 503 with Retry-After before
// reaching the platform; /readyz says degraded; when the store takes writes again every id
// is in it.
func TestStoredResponsesWhileASharedStoreRefuses(t *testing.T) {
	st := &storetest.Refusing{Store: tempBolt(t, store.BoltOptions{})}
	env := startEnv(t, envOptions{store: st, heldResponses: 16 << 10, heldRetry: 20 * time.Millisecond})
	st.Refuse.Store(true)
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
	st.Refuse.Store(false)
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

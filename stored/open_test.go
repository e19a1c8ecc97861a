package stored

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"modelgate/store"
)

// Open reads the embedded store's records back: a response kept by one life of the process
// is found by the next.
func TestOpenReadsRecordsBack(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Keeper, *store.Bolt) {
		st, err := store.OpenBolt(dir, store.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k, err := Open(st, Options{TTL: time.Hour}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return k, st
	}
	ctx := context.Background()
	k, st := open()
	resp := []byte(`{"id":"resp_open","object":"response","created_at":1795678887,"status":"completed","model":"m","output":[]}`)
	if err := k.KeepResponse(ctx, "team:a", Turn{Model: "m", Input: []byte(`[]`)}, resp); err != nil {
		t.Fatal(err)
	}
	k.Stop()
	st.Close()

	k, st = open()
	defer st.Close()
	defer k.Stop()
	if r, err := k.Get(ctx, "team:a", "resp_open"); err != nil || r.Model != "m" {
		t.Fatalf("after reopening: %+v, %v", r, err)
	}
}

package stored

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"modelgate/store"
	"modelgate/store/storetest"
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

// Close says in the log how many records the store still refused, lost with the process.
func TestCloseLogsWhatIsLost(t *testing.T) {
	st := &storetest.Refusing{Store: boltStore(t, nil)}
	k := NewKeeper(st, Options{TTL: time.Hour, RetryEvery: time.Hour, OnError: func(error) {}})
	st.Refuse.Store(true)
	keepChain(t, k, "team:a", "r", 2)
	k.Flush()
	var logged strings.Builder
	k.Close(slog.New(slog.NewTextHandler(&logged, nil)))
	if line := logged.String(); !strings.Contains(line, "lost with the process") || !strings.Contains(line, "records=2") {
		t.Fatalf("log %q", line)
	}
}

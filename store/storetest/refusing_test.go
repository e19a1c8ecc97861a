package storetest

import (
	"context"
	"errors"
	"testing"

	"modelgate/store"
)

// Refusing fails each kind of write while Refuse is set and passes it through otherwise;
// reads always pass.
func TestRefusingRefusesWritesOnly(t *testing.T) {
	ctx := context.Background()
	st := &Refusing{Store: OpenBolt(t, t.TempDir(), nil)}
	t.Cleanup(func() { st.Close() })
	writes := []struct {
		name  string
		write func(key string) error
	}{
		{"put", func(k string) error { return st.Put(ctx, "b", k, []byte("v"), 0) }},
		{"create", func(k string) error { _, err := st.Create(ctx, "b", k, []byte("v"), 0); return err }},
		{"batch", func(k string) error {
			return st.Batch(ctx, func(tx store.Tx) error { return tx.Put("b", k, []byte("v"), 0) })
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			st.Refuse.Store(true)
			if err := w.write(w.name + "-refused"); !errors.Is(err, ErrRefused) {
				t.Fatalf("while refusing: %v, want ErrRefused", err)
			}
			if _, err := st.Get(ctx, "b", w.name+"-refused"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a refused write was kept (read while refusing: %v)", err)
			}
			st.Refuse.Store(false)
			if err := w.write(w.name); err != nil {
				t.Fatalf("after refusing: %v", err)
			}
			st.Refuse.Store(true)
			if v, err := st.Get(ctx, "b", w.name); err != nil || string(v) != "v" {
				t.Fatalf("read while refusing: %q %v", v, err)
			}
		})
	}
}

func TestWriteFailuresCountsOneWriter(t *testing.T) {
	var h store.WriteHealth
	if n := WriteFailures(&h, store.WriterResponses); n != 0 {
		t.Fatalf("before any write: %d", n)
	}
	h.Wrote(store.WriterResponses, ErrRefused)
	h.Wrote(store.WriterResponses, ErrRefused)
	h.Wrote(store.WriterLedger, ErrRefused)
	h.Wrote(store.WriterUsage, nil)
	for w, want := range map[store.Writer]uint64{store.WriterResponses: 2, store.WriterLedger: 1, store.WriterUsage: 0} {
		if n := WriteFailures(&h, w); n != want {
			t.Errorf("failures of %s = %d, want %d", w, n, want)
		}
	}
}

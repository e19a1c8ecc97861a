package journal

import (
	"context"
	"testing"

	"modelgate/store"
)

// BenchmarkAdmit is one admission written and cleared, as a request does it, on the
// unsynced bbolt file main gives the journal with the embedded store: one at a time (every
// admission a batch of its own) and from GOMAXPROCS×8 goroutines (admissions share
// batches).
//
//	go test ./journal -run '^$' -bench Admit -benchmem -count 6
func BenchmarkAdmit(b *testing.B) {
	var counted *gatedStore
	open := func(b *testing.B) *Journal {
		st, err := store.OpenBolt(b.TempDir(), store.BoltOptions{File: "journal.db", NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		counted = &gatedStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
		close(counted.release)
		j := Open(counted, "0123456789abcdef", nil)
		b.Cleanup(func() { j.Close(); st.Close() })
		return j
	}
	// batches reports how many admissions a batch held on average.
	batches := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/float64(max(counted.batches.Load(), 1)), "admits/batch")
	}
	e := entry("r0")
	b.Run("serial", func(b *testing.B) {
		j := open(b)
		b.ReportAllocs()
		for b.Loop() {
			h, err := j.Admit(context.Background(), e)
			if err != nil {
				b.Fatal(err)
			}
			j.Clear(h)
		}
		batches(b)
	})
	b.Run("parallel", func(b *testing.B) {
		j := open(b)
		b.SetParallelism(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h, err := j.Admit(context.Background(), e)
				if err != nil {
					b.Error(err)
					return
				}
				j.Clear(h)
			}
		})
		batches(b)
	})
}

package journal

import (
	"context"
	"testing"
)

// BenchmarkAdmit is one admission written and cleared, as a request does it, on the
// journal's segment file: one at a time (every admission a write of its own) and from
// GOMAXPROCS×8 goroutines (admissions share writes).
//
//	go test ./journal -run '^$' -bench Admit -benchmem -count 6
func BenchmarkAdmit(b *testing.B) {
	var counted *counter
	open := func(b *testing.B) *Journal {
		counted = newCounter(false)
		return mustOpen(b, b.TempDir(), options{beforeWrite: counted.beforeWrite})
	}
	// batches reports how many admissions a write held on average.
	batches := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/float64(max(counted.writes.Load(), 1)), "admits/batch")
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

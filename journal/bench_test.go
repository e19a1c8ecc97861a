package journal

import (
	"context"
	"testing"
)

// BenchmarkAdmit is one admission written and cleared, as a request does it, on the
// journal's segment file: one at a time and from GOMAXPROCS×8 goroutines (admissions then
// wait for each other's copy into the segment).
//
//	go test ./journal -run '^$' -bench Admit -benchmem -count 6
func BenchmarkAdmit(b *testing.B) {
	open := func(b *testing.B) *Journal { return mustOpen(b, b.TempDir(), options{}) }
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
	})
}

package calibration

import (
	"strconv"
	"testing"
)

// The request path pays Observe once per answered call and Factor once or twice per
// admitted one; both must stay far under a microsecond and allocate nothing.
func benchTable() *Table {
	tb := New(nil, nil, nil)
	for i := range 20 {
		observe(tb, "model-"+strconv.Itoa(i), 50, 1000, 1200+int64(i))
	}
	return tb
}

func BenchmarkObserve(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	for b.Loop() {
		tb.Observe("", "model-7", 1000, 1234)
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tb.Observe("", "model-7", 1000, 1234)
		}
	})
}

func BenchmarkFactor(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	var sink int64
	for b.Loop() {
		f := tb.Factor("", "model-7")
		sink += f.Reserve(1000)
	}
	_ = sink
}

func BenchmarkFactorUnknownModel(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	for b.Loop() {
		_ = tb.Factor("", "not-calibrated")
	}
}

package main

import (
	"math"
	"testing"
)

// TestPairedRatios checks that a process's own speed cancels out of each two rounds in
// which the processes held opposite sides, and that an odd last round is left out.
func TestPairedRatios(t *testing.T) {
	const cost, fast = 0.98, 1.07 // what the setting costs; how much faster one process is
	cases := []struct {
		name string
		in   []float64
		want []float64
	}{
		{"none", nil, []float64{}},
		{"one round", []float64{cost * fast}, []float64{}},
		{"swapped", []float64{cost * fast, cost / fast, cost * fast, cost / fast}, []float64{cost, cost}},
		{"odd last round left out", []float64{cost * fast, cost / fast, 0.5}, []float64{cost}},
		{"no process effect", []float64{0.9, 1.0}, []float64{math.Sqrt(0.9)}},
	}
	for _, c := range cases {
		got := pairedRatios(c.in)
		if len(got) != len(c.want) {
			t.Errorf("%s: pairedRatios(%v) = %v; want %v", c.name, c.in, got, c.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("%s: pairedRatios(%v) = %v; want %v", c.name, c.in, got, c.want)
			}
		}
	}
}

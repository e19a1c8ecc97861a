package calibration

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// sample is one answered call: the raw estimate and what the platform reported.
type sample struct{ estimated, reported int64 }

func repeat(n int, s sample) []sample {
	out := make([]sample, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestFactorLearnedFromSamples(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []sample
		want    Factor
	}{
		{"no samples: the estimate stands alone", nil, Factor{1, 0, 0}},
		// One sample at 2 moves the ratio a fifth of the way: (2 + 4×1) / (1 + 4).
		{"one sample is shrunk towards 1", repeat(1, sample{100, 200}), Factor{1.2, 0, 1}},
		{"many samples outweigh the prior", repeat(96, sample{100, 200}), Factor{(192.0 + 4) / 100, 0, 96}},
		{"a low ratio", repeat(96, sample{100, 80}), Factor{(96*0.8 + 4) / 100, 0, 96}},
		// r = 10 is clamped to 4, and the mean of 4 to the ratio's ceiling of 3.
		{"one sample cannot exceed 4, nor the ratio 3", repeat(96, sample{10, 100}), Factor{3, 0, 96}},
		{"nor go below 0.25, nor the ratio below 0.5", repeat(96, sample{1000, 1}), Factor{0.5, 0, 96}},
		{"a single odd answer is clamped", append(repeat(6, sample{100, 100}), sample{8, 8000}),
			Factor{(6 + 4 + 4.0) / (7 + 4), 0, 7}},
		{"estimates under 8 tokens are ignored", repeat(50, sample{7, 70}), Factor{1, 0, 0}},
		{"a missing report is ignored", []sample{{100, 0}, {100, -5}}, Factor{1, 0, 0}},
		// 1 and 2 alternating: mean 1.5, standard deviation 0.5.
		{"spread is the coefficient of variation", append(repeat(4, sample{100, 100}), repeat(4, sample{100, 200})...),
			Factor{(12.0 + 4) / 12, 0.5 / 1.5, 8}},
		{"no spread before 8 samples", append(repeat(4, sample{100, 100}), repeat(3, sample{100, 200})...),
			Factor{(10.0 + 4) / 11, 0, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := New(nil, nil, nil)
			for _, s := range tc.samples {
				tb.Observe("", "m", s.estimated, s.reported)
			}
			got := tb.Factor("", "m")
			if !near(got.Ratio, tc.want.Ratio) || !near(got.Spread, tc.want.Spread) || got.Samples != tc.want.Samples {
				t.Errorf("Factor = %+v, want %+v", got, tc.want)
			}
			if other := tb.Factor("", "other"); other != (Factor{1, 0, 0}) {
				t.Errorf("an unseen model: %+v", other)
			}
		})
	}
}

func TestCountAndReserve(t *testing.T) {
	for _, tc := range []struct {
		name                string
		f                   Factor
		raw, count, reserve int64
	}{
		{"uncalibrated", Factor{1, 0, 0}, 100, 100, 100},
		{"the zero Factor leaves raw as it is", Factor{}, 100, 100, 100},
		{"ratio without spread", Factor{1.1, 0, 50}, 100, 110, 110},
		{"count rounds, reserve rounds up", Factor{1.234, 0, 50}, 10, 12, 13},
		{"margin is one spread", Factor{2, 0.25, 50}, 100, 200, 250},
		{"margin is capped at a half", Factor{1, 2, 50}, 100, 100, 150},
		{"a ratio under 1 lowers both", Factor{0.5, 0.1, 50}, 1000, 500, 550},
		{"nothing estimated", Factor{2, 0.3, 50}, 0, 0, 0},
		{"a negative estimate", Factor{2, 0.3, 50}, -4, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.Count(tc.raw); got != tc.count {
				t.Errorf("Count(%d) = %d, want %d", tc.raw, got, tc.count)
			}
			if got := tc.f.Reserve(tc.raw); got != tc.reserve {
				t.Errorf("Reserve(%d) = %d, want %d", tc.raw, got, tc.reserve)
			}
		})
	}
}

func TestModelsBounded(t *testing.T) {
	tb := New(nil, nil, nil)
	for i := range MaxModels {
		tb.Observe("", "model-"+strconv.Itoa(i), 100, 200)
	}
	tb.Observe("", "one-too-many", 100, 200)
	if f := tb.Factor("", "one-too-many"); f != (Factor{1, 0, 0}) {
		t.Errorf("a model beyond the bound was calibrated: %+v", f)
	}
	if f := tb.Factor("", "model-0"); f.Samples != 1 {
		t.Errorf("a model within the bound: %+v", f)
	}
	long := strings.Repeat("x", MaxModelLen+1)
	tb2 := New(nil, nil, nil)
	tb2.Observe("", long, 100, 200)
	tb2.Observe("", "", 100, 200)
	if n := len(tb2.Models()); n != 0 {
		t.Errorf("an empty or over-long model name was calibrated: %d models", n)
	}
	if got := len(tb.Models()); got != MaxModels {
		t.Errorf("Models() lists %d, want %d", got, MaxModels)
	}
}

func TestModelsSorted(t *testing.T) {
	tb := New(nil, nil, nil)
	for _, m := range []string{"zeta", "alpha", "mid"} {
		tb.Observe("", m, 100, 150)
	}
	got := tb.Models()
	if len(got) != 3 || got[0].Model != "alpha" || got[1].Model != "mid" || got[2].Model != "zeta" {
		t.Fatalf("Models() = %+v", got)
	}
	if got[0].Samples != 1 || !near(got[0].Ratio, (1.5+4)/5) {
		t.Errorf("alpha = %+v", got[0])
	}
}

// A caller's model name may point into its request body: the table keeps a copy.
func TestModelNameCopied(t *testing.T) {
	body := []byte(`{"model":"borrowed"}`)
	name := body[10:18]
	tb := New(nil, nil, nil)
	tb.Observe("", unsafeString(name), 100, 200)
	copy(body[10:], "XXXXXXXX")
	if got := tb.Models(); len(got) != 1 || got[0].Model != "borrowed" {
		t.Fatalf("Models() = %+v", got)
	}
}

func unsafeString(b []byte) string { return unsafe.String(&b[0], len(b)) }

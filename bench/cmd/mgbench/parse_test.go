package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// listCase is one input of a comma-separated list flag and what its parser must make of it.
type listCase[T comparable] struct {
	in      string
	want    []T
	wantErr bool
}

// checkListParser runs parse, named name in failures, on every case.
func checkListParser[T comparable](t *testing.T, name string, parse func(string) ([]T, error), cases []listCase[T]) {
	t.Helper()
	for _, c := range cases {
		got, err := parse(c.in)
		if (err != nil) != c.wantErr || !slices.Equal(got, c.want) {
			t.Errorf("%s(%q) = %v, %v; want %v (error %v)", name, c.in, got, err, c.want, c.wantErr)
		}
	}
}

// fuzzListParser fuzzes parse from seeds: a list it accepts must pass valid.
func fuzzListParser[T any](f *testing.F, name string, seeds []string, parse func(string) ([]T, error), valid func(s string, got []T) bool) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, err := parse(s); err == nil && !valid(s, got) {
			t.Fatalf("%s(%q) = %v", name, s, got)
		}
	})
}

func TestParseModes(t *testing.T) {
	checkListParser(t, "parseModes", parseModes, []listCase[string]{
		{in: "h1", want: []string{"h1"}},
		{in: "h1,h2,h2c", want: []string{"h1", "h2", "h2c"}},
		{in: " h2 , h1 ", want: []string{"h2", "h1"}},
		{in: "h2,", want: []string{"h2"}},
		{in: "", wantErr: true},
		{in: ",", wantErr: true},
		{in: "h3", wantErr: true},
		{in: "h2,h2", wantErr: true},
		{in: "H2", wantErr: true},
	})
}

func FuzzParseModes(f *testing.F) {
	fuzzListParser(f, "parseModes", []string{"h1", "h1,h2,h2c", "h2,h2", "", "h3,"}, parseModes, func(_ string, got []string) bool {
		if len(got) == 0 || len(got) > 3 {
			return false
		}
		for i, m := range got {
			if m != "h1" && m != "h2" && m != "h2c" || slices.Contains(got[:i], m) {
				return false
			}
		}
		return true
	})
}

func TestParseCounts(t *testing.T) {
	checkListParser(t, "parseCounts", parseCounts, []listCase[int]{
		{in: "1000", want: []int{1000}},
		{in: "1000,5000,10000", want: []int{1000, 5000, 10000}},
		{in: " 500 ,", want: []int{500}},
		{in: "", wantErr: true},
		{in: "0", wantErr: true},
		{in: "-5", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "1000,x", wantErr: true},
	})
}

func FuzzParseCounts(f *testing.F) {
	fuzzListParser(f, "parseCounts", []string{"1000", "1000,5000,10000", "0", ",", "99999999999999999999"}, parseCounts, func(s string, got []int) bool {
		if len(got) == 0 || len(got) > strings.Count(s, ",")+1 {
			return false
		}
		for _, n := range got {
			if n <= 0 {
				return false
			}
		}
		return true
	})
}

// TestSoakSlope checks the slope in bytes per ten minutes and that the warm-up is left out.
func TestSoakSlope(t *testing.T) {
	const mib = 1 << 20
	series := func(warm, after func(time.Duration) int64) []soakSample {
		var out []soakSample
		for at := time.Duration(0); at <= 10*time.Minute; at += 10 * time.Second {
			f := after
			if at < 2*time.Minute {
				f = warm
			}
			out = append(out, soakSample{at: at, rss: f(at)})
		}
		return out
	}
	flat := func(time.Duration) int64 { return 100 * mib }
	climbing := func(at time.Duration) int64 { return int64(at.Minutes() * 10 * mib) } // 100 MB in the first 10 minutes
	growing := func(at time.Duration) int64 { return 100*mib + int64(at.Minutes()/10*3*mib) }
	cases := []struct {
		name       string
		warm, rest func(time.Duration) int64
		want       float64 // MB per 10 minutes
	}{
		{"flat", flat, flat, 0},
		{"growth in the warm-up only", climbing, flat, 0},
		{"3 MB per 10 minutes after it", flat, growing, 3},
	}
	for _, c := range cases {
		r := &soakResult{warmUp: soakWarmUp(10 * time.Minute), samples: series(c.warm, c.rest)}
		if got := r.slope() / mib; math.Abs(got-c.want) > 0.01 {
			t.Errorf("%s: slope %.3f MB / 10 min, want %.3f", c.name, got, c.want)
		}
	}
}

func TestSoakWarmUp(t *testing.T) {
	// At least the longest stay (the first clients' turnover), but never over half the run.
	cases := []struct{ run, want time.Duration }{
		{10 * time.Minute, 2 * time.Minute},
		{270 * time.Second, 2 * time.Minute},
		{60 * time.Second, 30 * time.Second},
		{time.Hour, 2 * time.Minute},
	}
	for _, c := range cases {
		if got := soakWarmUp(c.run); got != c.want {
			t.Errorf("soakWarmUp(%s) = %s, want %s", c.run, got, c.want)
		}
	}
}

func TestSoakStoreYAML(t *testing.T) {
	cases := []struct {
		store, want string
		ok          bool
	}{
		{"off", "responses:\n  store: \"off\"\n", true},
		{"local", "responses:\n  store: \"local\"\n", true},
		{"", "", false},
		{"redis", "", false},
	}
	for _, c := range cases {
		got, err := soakStoreYAML(c.store)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("soakStoreYAML(%q) = %q, %v; want %q (ok %v)", c.store, got, err, c.want, c.ok)
		}
	}
}

func TestFitsDescriptors(t *testing.T) {
	cases := []struct {
		mode    string
		streams int
		want    bool
	}{
		{"h1", 5000, true},
		{"h1", 10000, false},
		{"h2", 10000, true},
		{"h2c", 10000, true},
		{"h2", 20000, false},
	}
	for _, c := range cases {
		m, err := newUpstreamMode(c.mode, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		b := &bench{mode: m, rep: report{nofile: 20000}}
		if got := b.fitsDescriptors(c.streams); got != c.want {
			t.Errorf("%s, %d streams: fits %v, want %v", c.mode, c.streams, got, c.want)
		}
	}
}

func TestParseNextGC(t *testing.T) {
	cases := []struct {
		name, in string
		want     int64
		ok       bool
	}{
		{"the gauge among others", "# HELP go_memstats_next_gc_bytes Number of heap bytes when next garbage collection will take place.\n# TYPE go_memstats_next_gc_bytes gauge\ngo_memstats_next_gc_bytes 2.80174592e+08\ngo_threads 9\n", 280174592, true},
		{"a prefix of another name is not it", "go_memstats_next_gc_bytes_total 5\n", 0, false},
		{"missing", "go_threads 9\n", 0, false},
		{"not a number", "go_memstats_next_gc_bytes NaNx\n", 0, false},
		{"negative", "go_memstats_next_gc_bytes -1\n", 0, false},
		{"NaN", "go_memstats_next_gc_bytes NaN\n", 0, false},
		{"empty", "", 0, false},
	}
	for _, c := range cases {
		got, err := parseNextGC(strings.NewReader(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s: parseNextGC = %d, %v; want %d (ok %v)", c.name, got, err, c.want, c.ok)
		}
	}
}

func FuzzParseNextGC(f *testing.F) {
	f.Add("go_memstats_next_gc_bytes 2.8e+08\n")
	f.Add("go_memstats_next_gc_bytes +Inf\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		v, err := parseNextGC(strings.NewReader(in))
		if err == nil && (v < 0 || v > 1<<50) {
			t.Fatalf("parseNextGC(%q) = %d, out of range", in, v)
		}
	})
}

// TestSoakGoalSlope checks the GC goal's slope, leaving out samples that have none.
func TestSoakGoalSlope(t *testing.T) {
	const mib = 1 << 20
	var samples []soakSample
	for at := time.Duration(0); at <= 10*time.Minute; at += 10 * time.Second {
		goal := int64(200*mib) + int64(at.Minutes()/10*4*mib) // 4 MB per 10 minutes
		if at%time.Minute == 0 {
			goal = 0 // /metrics did not answer
		}
		samples = append(samples, soakSample{at: at, rss: 300 * mib, goal: goal})
	}
	r := &soakResult{warmUp: 2 * time.Minute, samples: samples}
	if got := r.goalSlope() / mib; math.Abs(got-4) > 0.01 {
		t.Errorf("goal slope %.3f MB / 10 min, want 4", got)
	}
	if got := r.slope() / mib; math.Abs(got) > 0.01 {
		t.Errorf("RSS slope %.3f MB / 10 min, want 0", got)
	}
}

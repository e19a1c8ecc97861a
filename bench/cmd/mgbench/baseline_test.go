package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRunOrder checks that the candidate and the baseline swap order from one turn to the
// next, and that over any six consecutive turns each process holds each place twice.
func TestRunOrder(t *testing.T) {
	for turn := range 12 {
		o := runOrder(turn)
		s := slices.Clone(o[:])
		slices.Sort(s)
		if !slices.Equal(s, []int{byFloor, byCandidate, byBaseline}) {
			t.Fatalf("runOrder(%d) = %v: not each process once", turn, o)
		}
		candFirst := slices.Index(o[:], byCandidate) < slices.Index(o[:], byBaseline)
		if candFirst != (turn%2 == 0) {
			t.Errorf("runOrder(%d) = %v: candidate first %v, want %v", turn, o, candFirst, turn%2 == 0)
		}
	}
	for start := range 6 {
		var places [3][3]int // process, place
		for turn := start; turn < start+6; turn++ {
			for place, p := range runOrder(turn) {
				places[p][place]++
			}
		}
		if places != [3][3]int{{2, 2, 2}, {2, 2, 2}, {2, 2, 2}} {
			t.Errorf("turns %d-%d: places per process %v, want each twice", start, start+5, places)
		}
	}
}

func TestPerRound(t *testing.T) {
	cases := []struct {
		name     string
		num, den []float64
		want     []float64
	}{
		{"rounds", []float64{10, 9, 12}, []float64{10, 10, 8}, []float64{1, 0.9, 1.5}},
		{"the shorter one sets the rounds", []float64{10, 9}, []float64{5}, []float64{2}},
		{"nothing to divide by", []float64{10, 9}, []float64{0, 9}, []float64{math.NaN(), 1}},
		{"none", nil, nil, []float64{}},
	}
	for _, c := range cases {
		got := perRound(c.num, c.den)
		if !slices.EqualFunc(got, c.want, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
			t.Errorf("%s: perRound(%v, %v) = %v, want %v", c.name, c.num, c.den, got, c.want)
		}
	}
}

// TestSummarizeBaseline builds four rounds in which the candidate costs 2% and whichever
// build starts first is 6% faster, the first build alternating as the phase alternates it:
// each round's ratio carries the start order's 6%, the pairs of rounds do not.
func TestSummarizeBaseline(t *testing.T) {
	const cost, first = 0.98, 1.06
	s := &scenario{base: &baselineSide{}}
	for round := range 4 {
		cand, base := 1000*cost, 1000.0
		if round%2 == 0 {
			cand *= first
		} else {
			base *= first
		}
		s.mg.rps = append(s.mg.rps, cand)
		s.base.rps = append(s.base.rps, base)
		s.flr.rps = append(s.flr.rps, 1250)
		s.mg.cpu = append(s.mg.cpu, 51)
		s.base.cpu = append(s.base.cpu, 50)
		s.base.togetherRatios = append(s.base.togetherRatios, cand/base)
		s.base.togetherCPURatios = append(s.base.togetherCPURatios, 1.02)
	}
	got := summarizeBaseline(s)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %.6f, want %.6f", name, got, want)
		}
	}
	near("paired", got.paired, cost)
	near("together paired", got.togetherPaired, cost)
	if got.pairs != 2 {
		t.Errorf("pairs = %d, want 2", got.pairs)
	}
	// The per-round median is the mean of one round of each order: not the cost.
	near("ratio", got.ratio, (cost*first+cost/first)/2)
	near("range low", got.lo, cost/first)
	near("range high", got.hi, cost*first)
	near("together", got.together, (cost*first+cost/first)/2)
	near("CPU ratio", got.cpu, 51.0/50)
	near("together CPU ratio", got.togetherCPU, 1.02)
	near("candidate rps", got.candRPS, 1000*cost*(first+1)/2)
	near("baseline rps", got.baseRPS, 1000*(first+1)/2)
	near("candidate / floor", got.candFloor, 1000*cost*(first+1)/2/1250)
	near("baseline / floor", got.baseFloor, 1000*(first+1)/2/1250)
}

func TestCheckBaseline(t *testing.T) {
	withBinary := t.TempDir()
	if err := os.WriteFile(filepath.Join(withBinary, baselineBinary), nil, 0o700); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tp := map[string]bool{"throughput": true, "latency": true}
	cases := []struct {
		name, rev string
		phases    map[string]bool
		bin       string
		wantErr   string
	}{
		{"no baseline", "", map[string]bool{"memory": true}, empty, ""},
		{"built", "main", tp, withBinary, ""},
		{"not built", "main", tp, empty, "bench/run.sh builds it"},
		{"no throughput phase", "main", map[string]bool{"latency": true}, withBinary, "add throughput to --phases"},
	}
	for _, c := range cases {
		err := checkBaseline(c.rev, c.phases, c.bin)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.wantErr)
		}
	}
}

func TestBuildLabel(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, baselineBinary+".commit"), []byte("78fede6c72dd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := buildLabel(dir, baselineBinary); got != "78fede6c72dd" {
		t.Errorf("buildLabel = %q, want the commit without its newline", got)
	}
	if got := buildLabel(dir, "modelgate"); got != "" {
		t.Errorf("buildLabel of a build run.sh said nothing about = %q, want empty", got)
	}
}

func TestBaselineTitle(t *testing.T) {
	o := options{baseline: "main", baselineCommit: "78fede6c72dd", candidateCommit: "0123456789ab+changes"}
	if got, want := baselineTitle(o), "candidate work tree (0123456789ab+changes) vs baseline main (78fede6c72dd)"; !strings.HasPrefix(got, want) {
		t.Errorf("title %q, want it to start %q", got, want)
	}
	o.pairControl = true
	if got, want := baselineTitle(o), "control: baseline main (78fede6c72dd) against itself"; !strings.HasPrefix(got, want) {
		t.Errorf("control's title %q, want it to start %q", got, want)
	}
}

// TestPrintBaseline checks the table's verdicts against the 3% target, per route.
func TestPrintBaseline(t *testing.T) {
	sc := func(name string, ratio float64) *scenario {
		s := &scenario{name: name, base: &baselineSide{}}
		for range 2 {
			s.mg.rps, s.base.rps, s.flr.rps = append(s.mg.rps, 1000*ratio), append(s.base.rps, 1000), append(s.flr.rps, 1100)
			s.mg.cpu, s.base.cpu = append(s.mg.cpu, 50), append(s.base.cpu, 50)
			s.base.togetherRatios = append(s.base.togetherRatios, ratio)
			s.base.togetherCPURatios = append(s.base.togetherCPURatios, 1)
		}
		return s
	}
	rep := &report{mode: "h1", throughput: []*scenario{sc("/v1/responses", 0.99), sc("/v1/messages", 0.95)}}
	var out strings.Builder
	printBaseline(&out, options{baseline: "main"}, []*report{rep}, func(r *report) int { return len(r.throughput) })
	rows := map[string]string{}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if name, _, ok := strings.Cut(line, "\t"); ok {
			rows[name] = line
		}
	}
	for name, want := range map[string]string{"/v1/responses": "\t0.990\t0.990–0.990\t0.990 (1)\tok\t", "/v1/messages": "\t0.950\t0.950–0.950\t0.950 (1)\tMISSED\t"} {
		if !strings.Contains(rows[name], want) {
			t.Errorf("row %q, want it to hold %q", rows[name], want)
		}
	}
}

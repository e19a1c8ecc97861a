package main

import (
	"fmt"
	"io"
	"math"
)

// baselineSummary is one route's candidate-against-baseline figures, each a median over
// rounds of the ratio taken within a round.
type baselineSummary struct {
	candRPS, baseRPS     float64 // each build's rps
	ratio, lo, hi        float64 // candidate rps / baseline rps, and its range
	paired               float64 // the geometric means of rounds 1+2, 3+4, ... (pairedRatios)
	pairs                int
	cpu                  float64 // candidate CPU per request / the baseline's
	candFloor, baseFloor float64 // each build's rps / the floor's
	together, tLo, tHi   float64 // candidate rps / baseline rps with both loaded at once
	togetherPaired       float64
	togetherCPU          float64
}

// summarizeBaseline reduces a scenario measured with --baseline to its ratios.
func summarizeBaseline(s *scenario) baselineSummary {
	ratios := perRound(s.mg.rps, s.base.rps)
	together := s.base.togetherRatios
	sum := baselineSummary{
		candRPS: median(s.mg.rps), baseRPS: median(s.base.rps),
		ratio: median(ratios), paired: median(pairedRatios(ratios)), pairs: len(pairedRatios(ratios)),
		cpu:       median(perRound(s.mg.cpu, s.base.cpu)),
		candFloor: median(perRound(s.mg.rps, s.flr.rps)), baseFloor: median(perRound(s.base.rps, s.flr.rps)),
		together: median(together), togetherPaired: median(pairedRatios(together)),
		togetherCPU: median(s.base.togetherCPURatios),
	}
	sum.lo, sum.hi = minmax(ratios)
	sum.tLo, sum.tHi = minmax(together)
	return sum
}

// perRound is num[i]/den[i] for each round both measured. A round with nothing to divide
// by (a run that completed no request) reads as NaN, which median sorts first, rather than
// as an infinitely better round.
func perRound(num, den []float64) []float64 {
	out := make([]float64, min(len(num), len(den)))
	for i := range out {
		out[i] = math.NaN()
		if den[i] > 0 {
			out[i] = num[i] / den[i]
		}
	}
	return out
}

// baselineTitle is the comparison's heading: what was compared with what, and how.
func baselineTitle(o options) string {
	base := o.baseline
	if o.baselineCommit != "" {
		base += " (" + o.baselineCommit + ")"
	}
	cand := "work tree"
	if o.candidateCommit != "" {
		cand += " (" + o.candidateCommit + ")"
	}
	if o.pairControl {
		return "control: baseline " + base + " against itself, fresh processes each round"
	}
	return "candidate " + cand + " vs baseline " + base + ", fresh processes each round"
}

// printBaseline writes the candidate-against-baseline table, each row's modes together.
func printBaseline(w io.Writer, o options, reps []*report, n func(*report) int) {
	fmt.Fprintln(w, baselineTitle(o))
	fmt.Fprintf(w, "throughput (candidate rps / baseline rps)\tupstream\tcandidate rps\tbaseline rps\tratio (median)\tratio range\tpairs of rounds (median)\ttarget >= %.2f\t"+
		"CPU/req cand/base\tcand/floor\tbase/floor\tratio run together (median)\trange\tpairs of rounds (median)\ttarget >= %.2f\tCPU/req together cand/base\t\n",
		baselineTarget, baselineTarget)
	eachRow(reps, n, func(i int, r *report) {
		s := r.throughput[i]
		m := summarizeBaseline(s)
		fmt.Fprintf(w, "%s\t%s\t%.0f\t%.0f\t%.3f\t%.3f–%.3f\t%.3f (%d)\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f–%.3f\t%.3f\t%s\t%.3f\t\n",
			s.name, r.mode, m.candRPS, m.baseRPS, m.ratio, m.lo, m.hi, m.paired, m.pairs, verdict(m.ratio >= baselineTarget),
			m.cpu, m.candFloor, m.baseFloor, m.together, m.tLo, m.tHi, m.togetherPaired, verdict(m.together >= baselineTarget), m.togetherCPU)
	})
	fmt.Fprintln(w, "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t")
}

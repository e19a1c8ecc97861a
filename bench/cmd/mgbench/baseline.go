package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// baselineBinary is the modelgate that run.sh builds from --baseline's revision, beside the
// work tree's "modelgate" in --bin; baselineBinary+".commit" names the commit it came from.
const baselineBinary = "modelgate-baseline"

// baselineTarget is the least share of the baseline's throughput the candidate may keep:
// "within 3% of today's on every route".
const baselineTarget = 0.97

// baselineSide is what a throughput scenario measured through the baseline build, beside
// the candidate's figures in scenario.mg, and the two builds run at once.
type baselineSide struct {
	side
	togetherRatios    []float64 // candidate rps / baseline rps with both loaded at once, per round
	togetherCPURatios []float64 // candidate CPU per request / the baseline's in those runs
}

// checkBaseline refuses a --baseline the run could not use, before anything starts.
func checkBaseline(rev string, phases map[string]bool, binDir string) error {
	if rev == "" {
		return nil
	}
	if !phases["throughput"] {
		return errors.New("--baseline is compared in the throughput phase; add throughput to --phases")
	}
	if _, err := os.Stat(filepath.Join(binDir, baselineBinary)); err != nil {
		return fmt.Errorf("--baseline %s: no %s in %q; bench/run.sh builds it from the revision", rev, baselineBinary, binDir)
	}
	return nil
}

// buildLabel is what run.sh wrote about the build bin in binDir (its commit), or "" when
// it wrote nothing.
func buildLabel(binDir, bin string) string {
	b, err := os.ReadFile(filepath.Join(binDir, bin+".commit"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Processes of a throughput round, as runOrder names them.
const (
	byFloor = iota
	byCandidate
	byBaseline
)

// runOrder is the order in which a turn runs the floor, the candidate and the baseline. The
// candidate runs before the baseline on even turns and after it on odd ones, so the two
// rounds of a pair (see pairedRatios) see both orders; over six turns each process holds
// each place twice, so none is always the one that runs on a box the others have just warmed.
func runOrder(turn int) [3]int {
	orders := [...][3]int{
		{byFloor, byCandidate, byBaseline},
		{byBaseline, byCandidate, byFloor},
		{byCandidate, byFloor, byBaseline},
		{byBaseline, byFloor, byCandidate},
		{byCandidate, byBaseline, byFloor},
		{byFloor, byBaseline, byCandidate},
	}
	return orders[turn%len(orders)]
}

// throughputAgainstBaseline is the throughput phase with --baseline: every round starts a
// fresh candidate (the work tree's build) and a fresh baseline, identical but for the binary
// (same config, same upstream, an empty data directory each), the one that starts first
// alternating from round to round, warms both, runs each scenario through the floor, the
// candidate and the baseline in runOrder, then the two builds at once, and stops them.
//
// Two fresh processes of one binary differ by 5-10% here for reasons not pinned down; the
// paired phases cancel that by trading configs between two processes by a reload, which
// cannot trade binaries. Fresh processes every round make that difference a new draw each
// round, noise the median over rounds absorbs, instead of a bias that one process pair
// would carry through the whole run; what start order does falls on either side in
// alternate rounds and cancels in the pairs of rounds.
func (b *bench) throughputAgainstBaseline(scs []*scenario, sc []throughputScripts) error {
	candBin := filepath.Join(b.o.binDir, "modelgate")
	baseBin := filepath.Join(b.o.binDir, baselineBinary)
	if b.o.pairControl {
		candBin = baseBin
	}
	for _, s := range scs {
		s.base = &baselineSide{}
	}
	for round := range b.o.rounds {
		cand, base, err := b.startBuilds(round, candBin, baseBin)
		if err != nil {
			return err
		}
		err = b.baselineRound(round, scs, sc, cand, base)
		cand.stop()
		base.stop()
		if err != nil {
			return err
		}
	}
	b.rep.throughput = scs
	return nil
}

// startBuilds starts a fresh candidate and a fresh baseline, the candidate first in even
// rounds, and warms both on every scenario in the same order.
func (b *bench) startBuilds(round int, candBin, baseBin string) (cand, base *proc, err error) {
	start := func(into **proc, name, bin string) func() error {
		return func() (err error) {
			*into, err = b.startFresh(name, bin)
			return err
		}
	}
	if err := inTurn(round, start(&cand, "mg-candidate", candBin), start(&base, "mg-baseline", baseBin)); err != nil {
		cand.stop()
		base.stop()
		return nil, nil, err
	}
	return cand, base, nil
}

// startFresh starts the modelgate binary bin as name with the bench's config and an empty
// data directory: a kept response or usage row of an earlier round is not there to make one
// round's process differ from another's.
func (b *bench) startFresh(name, bin string) (*proc, error) {
	if err := os.RemoveAll(filepath.Join(b.o.workDir, name+"-data")); err != nil {
		return nil, err
	}
	p, err := startModelgate(name, b.o.workDir, bin, b.modelgateConfig(b.up, false, ""))
	if err != nil {
		return nil, err
	}
	b.children = append(b.children, p)
	return p, nil
}

// baselineRound warms the round's two fresh builds, then measures every scenario through
// the three processes in turn and through the two builds at once.
func (b *bench) baselineRound(round int, scs []*scenario, sc []throughputScripts, cand, base *proc) error {
	first, second := cand, base
	if round%2 == 1 {
		first, second = base, cand
	}
	for i, s := range scs {
		for _, p := range []*proc{first, second} {
			if err := warmUp(p, s.mgPath, sc[i].mg, b.o.threads, b.o.conns); err != nil {
				return err
			}
		}
	}
	for i, s := range scs {
		turn := round + i
		runs := [3]func() error{
			byFloor:     func() error { return b.measure(&s.flr, b.flr, "/v1/responses", sc[i].flr) },
			byCandidate: func() error { return b.measure(&s.mg, cand, s.mgPath, sc[i].mg) },
			byBaseline:  func() error { return b.measure(&s.base.side, base, s.mgPath, sc[i].mg) },
		}
		for _, k := range runOrder(turn) {
			if err := runs[k](); err != nil {
				return err
			}
		}
		n := len(s.mg.rps) - 1
		s.ratios = append(s.ratios, s.mg.rps[n]/s.flr.rps[n])
		// wrkTogether starts its second process's wrk on a goroutine of its own; which
		// build that is alternates with the turn, as the order of the runs above does.
		var candT, baseT run1
		var err error
		if turn%2 == 0 {
			baseT, candT, err = b.wrkTogether(base, cand, s.mgPath, sc[i].mg, sc[i].mg)
		} else {
			candT, baseT, err = b.wrkTogether(cand, base, s.mgPath, sc[i].mg, sc[i].mg)
		}
		if err != nil {
			return err
		}
		s.base.togetherRatios = append(s.base.togetherRatios, candT.res.rps/baseT.res.rps)
		s.base.togetherCPURatios = append(s.base.togetherCPURatios, float64(candT.cpuPerReq)/float64(baseT.cpuPerReq))
		fmt.Fprintf(os.Stderr, "round %d %-28s floor %8.0f rps  candidate %8.0f rps %6.1f µs  baseline %8.0f rps %6.1f µs  ratio %.3f  together %.0f / %.0f rps, ratio %.3f, CPU ratio %.3f\n",
			round+1, s.name, s.flr.rps[n], s.mg.rps[n], s.mg.cpu[n], s.base.rps[n], s.base.cpu[n], s.mg.rps[n]/s.base.rps[n],
			candT.res.rps, baseT.res.rps, s.base.togetherRatios[n], s.base.togetherCPURatios[n])
	}
	return nil
}

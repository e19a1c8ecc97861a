package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// pairCase is one route measured through two fresh modelgates that differ in one setting
// (and, for some comparisons, in what the request carries): "off" without it, "on" with it.
type pairCase struct {
	name, path      string
	offBody, onBody []byte
	offHeaders      map[string]string // headers of the "off" requests
	onHeaders       map[string]string // headers of the "on" requests
	offRPS, onRPS   []float64
	ratios          []float64 // on rps / off rps, per round
	offCPU, onCPU   []float64 // µs per request
	// The same two runs at once, each with its own wrk: whatever else the box is doing in
	// those seconds slows both alike, so their ratio holds still where the ratio of runs
	// taken one after the other moves with the box (±10–15% a round on a shared machine).
	togetherRatios []float64
	// and the ratio of their CPU per request, off over on: what the box's throughput would
	// be if modelgate had it to itself
	togetherCPURatios []float64
}

// pairComparison is the result of one comparePair: what was compared, and the cases.
type pairComparison struct {
	title    string // the report's heading
	offLabel string
	onLabel  string
	target   float64 // the lowest acceptable median ratio
	cases    []*pairCase
	// swapRoles: the two processes trade configs from one round to the next (see
	// comparePair). Only for settings a reload applies.
	swapRoles bool
}

// storeCost prices keeping responses: the same wrk runs against a modelgate that keeps
// every answer and one that keeps none, alternating within each round. benchup gives
// every answer an id of its own, so each is a new record, as with a real platform.
func (b *bench) storeCost() error {
	c := &pairComparison{title: "responses.store local vs off", offLabel: "off", onLabel: "local", target: 0.98, cases: []*pairCase{
		{name: "/v1/responses", path: "/v1/responses", offBody: respBody, onBody: respBody},
		{name: "/v1/responses stream", path: "/v1/responses", offBody: respStreamBody, onBody: respStreamBody},
	}}
	if err := b.comparePair("store", "responses:\n  store: off\n", "responses:\n  store: local\n", c); err != nil {
		return err
	}
	b.rep.pairs = append(b.rep.pairs, c)
	return nil
}

// comparePair starts two fresh modelgates, one whose config ends with offYAML and one with
// onYAML, and runs each case's wrk through both, alternating within each round. With
// c.swapRoles, the two processes trade configs by a reload (SIGHUP) before each round after
// the first, so they hold opposite sides in alternate rounds and each side is served by
// either process half the time: what differs between two processes besides their config
// (which started first, where their memory lies, their log file) falls on both sides alike
// instead of on one.
func (b *bench) comparePair(name, offYAML, onYAML string, c *pairComparison) error {
	if b.o.pairControl {
		onYAML = offYAML
		c.title, c.onLabel = c.title+" (control: off against off)", c.offLabel+" again"
		for _, pc := range c.cases {
			pc.onBody, pc.onHeaders = pc.offBody, pc.offHeaders
		}
	}
	onName, offName := "mg-"+name+"-on", "mg-"+name+"-off"
	if c.swapRoles { // each process serves both sides
		onName, offName = "mg-"+name+"-a", "mg-"+name+"-b"
	}
	on, err := b.startModelgateWith(onName, false, onYAML)
	if err != nil {
		return err
	}
	defer on.stop()
	off, err := b.startModelgateWith(offName, false, offYAML)
	if err != nil {
		return err
	}
	defer off.stop()
	type scripts struct{ off, on string }
	s := make([]scripts, len(c.cases))
	for i, pc := range c.cases {
		id := name + "-" + strconv.Itoa(i)
		if s[i].off, err = luaScript(b.o.workDir, id+"-off", benchKey, pc.offBody, pc.offHeaders); err != nil {
			return err
		}
		if s[i].on, err = luaScript(b.o.workDir, id+"-on", benchKey, pc.onBody, pc.onHeaders); err != nil {
			return err
		}
	}
	warm := func(off, on *proc) error {
		for i, pc := range c.cases {
			if err := warmUp(off, pc.path, s[i].off, b.o.threads, b.o.conns); err != nil {
				return err
			}
			if err := warmUp(on, pc.path, s[i].on, b.o.threads, b.o.conns); err != nil {
				return err
			}
		}
		return nil
	}
	if err := warm(off, on); err != nil {
		return err
	}
	for round := range b.o.rounds {
		off, on := off, on
		if c.swapRoles && round%2 == 1 {
			off, on = on, off
		}
		if c.swapRoles && round > 0 {
			if err := b.swapConfigs(off, on, offYAML, onYAML); err != nil {
				return err
			}
			if err := warm(off, on); err != nil {
				return err
			}
		}
		for i, pc := range c.cases {
			if err := b.pairRound(round, round+i, pc, c, off, on, s[i].off, s[i].on); err != nil {
				return err
			}
		}
	}
	return nil
}

// swapConfigs reloads off with the "off" config and on with the "on" one.
func (b *bench) swapConfigs(off, on *proc, offYAML, onYAML string) error {
	if err := off.reload(b.modelgateConfig(b.up, false, offYAML)); err != nil {
		return err
	}
	return on.reload(b.modelgateConfig(b.up, false, onYAML))
}

// pairRound runs one round of one case: off and on one after the other (which goes first
// follows turn's parity), then both at once.
func (b *bench) pairRound(round, turn int, pc *pairCase, c *pairComparison, off, on *proc, offScript, onScript string) error {
	err := inTurn(turn,
		func() error {
			r, err := b.wrkOnce(off, pc.path, offScript, b.o.threads, b.o.conns, b.o.duration)
			pc.offRPS, pc.offCPU = append(pc.offRPS, r.res.rps), append(pc.offCPU, us(r.cpuPerReq))
			return err
		},
		func() error {
			r, err := b.wrkOnce(on, pc.path, onScript, b.o.threads, b.o.conns, b.o.duration)
			pc.onRPS, pc.onCPU = append(pc.onRPS, r.res.rps), append(pc.onCPU, us(r.cpuPerReq))
			return err
		})
	if err != nil {
		return err
	}
	n := len(pc.offRPS) - 1
	pc.ratios = append(pc.ratios, pc.onRPS[n]/pc.offRPS[n])
	offT, onT, err := b.wrkTogether(off, on, pc.path, offScript, onScript)
	if err != nil {
		return err
	}
	pc.togetherRatios = append(pc.togetherRatios, onT.res.rps/offT.res.rps)
	pc.togetherCPURatios = append(pc.togetherCPURatios, float64(offT.cpuPerReq)/float64(onT.cpuPerReq))
	fmt.Fprintf(os.Stderr, "round %d %-28s %s %8.0f rps %6.1f µs  %s %8.0f rps %6.1f µs  ratio %.3f  together %.0f / %.0f rps, ratio %.3f, CPU ratio %.3f\n", round+1, pc.name,
		c.offLabel, pc.offRPS[n], pc.offCPU[n], c.onLabel, pc.onRPS[n], pc.onCPU[n], pc.ratios[n],
		offT.res.rps, onT.res.rps, pc.togetherRatios[n], pc.togetherCPURatios[n])
	return nil
}

// wrkTogether runs the "off" and the "on" wrk at the same time, each with half the
// connections the runs one after the other use (and half the threads, one at least), so
// the two load the box about as one run does.
func (b *bench) wrkTogether(off, on *proc, path, offScript, onScript string) (offRun, onRun run1, err error) {
	threads, conns := max(1, b.o.threads/2), max(1, b.o.conns/2)
	var onErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		onRun, onErr = b.wrkOnce(on, path, onScript, threads, conns, b.o.duration)
	}()
	offRun, err = b.wrkOnce(off, path, offScript, threads, conns, b.o.duration)
	<-done
	return offRun, onRun, errors.Join(err, onErr)
}

// print writes the comparison's table.
func (c *pairComparison) print(w io.Writer) {
	fmt.Fprintf(w, "%s\t%s rps\t%s rps\tratio (median)\tratio range\tCPU µs %s/%s\tCPU added\ttarget >= %.2f\tratio run together (median)\trange\ttarget >= %.2f\tCPU ratio together (median)\trange\t\n",
		c.title, c.offLabel, c.onLabel, c.offLabel, c.onLabel, c.target, c.target)
	for _, pc := range c.cases {
		lo, hi := minmax(pc.ratios)
		cOff, cOn := median(pc.offCPU), median(pc.onCPU)
		tLo, tHi := minmax(pc.togetherRatios)
		cLo, cHi := minmax(pc.togetherCPURatios)
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.3f\t%.2f–%.2f\t%.1f / %.1f\t%+.1f%%\t%s\t%.3f\t%.3f–%.3f\t%s\t%.3f\t%.3f–%.3f\t\n", pc.name, median(pc.offRPS), median(pc.onRPS),
			median(pc.ratios), lo, hi, cOff, cOn, 100*(cOn-cOff)/cOff, verdict(median(pc.ratios) >= c.target),
			median(pc.togetherRatios), tLo, tHi, verdict(median(pc.togetherRatios) >= c.target),
			median(pc.togetherCPURatios), cLo, cHi)
	}
	fmt.Fprintln(w, "\t\t\t\t\t\t\t\t\t\t\t\t\t")
	if !c.swapRoles {
		return
	}
	fmt.Fprintf(w, "%s, run together, each two rounds in which the processes held opposite sides\tpairs\tratio (median)\trange\ttarget >= %.2f\tCPU ratio (median)\trange\t\n", c.title, c.target)
	for _, pc := range c.cases {
		rps, cpu := pairedRatios(pc.togetherRatios), pairedRatios(pc.togetherCPURatios)
		lo, hi := minmax(rps)
		cLo, cHi := minmax(cpu)
		fmt.Fprintf(w, "%s\t%d\t%.3f\t%.3f–%.3f\t%s\t%.3f\t%.3f–%.3f\t\n", pc.name, len(rps), median(rps), lo, hi, verdict(median(rps) >= c.target), median(cpu), cLo, cHi)
	}
	fmt.Fprintln(w, "\t\t\t\t\t\t\t")
}

// pairedRatios are the geometric means of each two rounds in which the processes held
// opposite sides (rounds 1 and 2, 3 and 4, ...; an odd last round is left out). Whatever
// makes one process faster than the other multiplies one round's ratio by f and the next
// one's by 1/f, so each mean is free of it.
func pairedRatios(rs []float64) []float64 {
	out := make([]float64, 0, len(rs)/2)
	for i := 0; i+1 < len(rs); i += 2 {
		out = append(out, math.Sqrt(rs[i]*rs[i+1]))
	}
	return out
}

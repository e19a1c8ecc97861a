package main

import (
	"fmt"
	"io"
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
}

// pairComparison is the result of one comparePair: what was compared, and the cases.
type pairComparison struct {
	title    string // the report's heading
	offLabel string
	onLabel  string
	target   float64 // the lowest acceptable median ratio
	cases    []*pairCase
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
// onYAML, and runs each case's wrk through both, alternating within each round.
func (b *bench) comparePair(name, offYAML, onYAML string, c *pairComparison) error {
	on, err := b.startModelgateWith("mg-"+name+"-on", false, onYAML)
	if err != nil {
		return err
	}
	defer on.stop()
	off, err := b.startModelgateWith("mg-"+name+"-off", false, offYAML)
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
		if err := warmUp(off, pc.path, s[i].off, b.o.threads, b.o.conns); err != nil {
			return err
		}
		if err := warmUp(on, pc.path, s[i].on, b.o.threads, b.o.conns); err != nil {
			return err
		}
	}
	for round := range b.o.rounds {
		for i, pc := range c.cases {
			err := inTurn(round+i,
				func() error {
					r, err := b.wrkOnce(off, pc.path, s[i].off, b.o.threads, b.o.conns, b.o.duration)
					pc.offRPS, pc.offCPU = append(pc.offRPS, r.res.rps), append(pc.offCPU, us(r.cpuPerReq))
					return err
				},
				func() error {
					r, err := b.wrkOnce(on, pc.path, s[i].on, b.o.threads, b.o.conns, b.o.duration)
					pc.onRPS, pc.onCPU = append(pc.onRPS, r.res.rps), append(pc.onCPU, us(r.cpuPerReq))
					return err
				})
			if err != nil {
				return err
			}
			n := len(pc.offRPS) - 1
			pc.ratios = append(pc.ratios, pc.onRPS[n]/pc.offRPS[n])
			fmt.Fprintf(os.Stderr, "round %d %-28s %s %8.0f rps %6.1f µs  %s %8.0f rps %6.1f µs  ratio %.3f\n", round+1, pc.name,
				c.offLabel, pc.offRPS[n], pc.offCPU[n], c.onLabel, pc.onRPS[n], pc.onCPU[n], pc.ratios[n])
		}
	}
	return nil
}

// print writes the comparison's table.
func (c *pairComparison) print(w io.Writer) {
	fmt.Fprintf(w, "%s\t%s rps\t%s rps\tratio (median)\tratio range\tCPU µs %s/%s\tCPU added\ttarget >= %.2f\t\n",
		c.title, c.offLabel, c.onLabel, c.offLabel, c.onLabel, c.target)
	for _, pc := range c.cases {
		lo, hi := minmax(pc.ratios)
		cOff, cOn := median(pc.offCPU), median(pc.onCPU)
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.3f\t%.2f–%.2f\t%.1f / %.1f\t%+.1f%%\t%s\t\n", pc.name, median(pc.offRPS), median(pc.onRPS),
			median(pc.ratios), lo, hi, cOff, cOn, 100*(cOn-cOff)/cOff, verdict(median(pc.ratios) >= c.target))
	}
	fmt.Fprintln(w, "\t\t\t\t\t\t\t\t")
}

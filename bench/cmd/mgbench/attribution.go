package main

import (
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
)

// attributionCase is one route measured through two fresh modelgates: one with no tags
// recorded and requests that name no end user ("off"), one with usage.tag_keys set and
// requests that name an end user, carry two metadata tags and the x-modelgate-tags header
// ("on"). The ratio is what recording tags and users costs (issue 28: at least 0.97).
type attributionCase struct {
	name, path    string
	off, on       []byte
	offRPS, onRPS []float64
	ratios        []float64 // on rps / off rps, per round
	offCPU, onCPU []float64 // µs per request
}

const attributionTags = "feature=bench,customer=acme"

// attributionCost runs the attribution phase: the same wrk runs against both modelgates,
// alternating within each round.
func (b *bench) attributionCost() error {
	off, err := b.startModelgateWith("mg-attr-off", false, "")
	if err != nil {
		return err
	}
	defer off.stop()
	on, err := b.startModelgateWith("mg-attr-on", false, "usage:\n  tag_keys: [feature, customer]\n")
	if err != nil {
		return err
	}
	defer on.stop()
	cases := []*attributionCase{
		{name: "/v1/responses", path: "/v1/responses", off: respBody,
			on: []byte(`{"model":"bench-fast","input":"Write one short sentence about benchmarks.","user":"user-4242","metadata":{"feature":"search","customer":"acme"}}`)},
		{name: "/v1/chat/completions", path: "/v1/chat/completions", off: chatBody,
			on: []byte(`{"model":"bench-fast","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}],"user":"user-4242","metadata":{"feature":"search","customer":"acme"}}`)},
	}
	type scripts struct{ off, on string }
	ss := make([]scripts, len(cases))
	for i, c := range cases {
		if ss[i].off, err = luaScript(b.o.workDir, "attr-off-"+strconv.Itoa(i), benchKey, c.off); err != nil {
			return err
		}
		if ss[i].on, err = luaScript(b.o.workDir, "attr-on-"+strconv.Itoa(i), benchKey, c.on); err != nil {
			return err
		}
		if err := appendLuaHeader(ss[i].on, "X-Modelgate-Tags", attributionTags); err != nil {
			return err
		}
		if err := warmUp(off, c.path, ss[i].off, b.o.threads, b.o.conns); err != nil {
			return err
		}
		if err := warmUp(on, c.path, ss[i].on, b.o.threads, b.o.conns); err != nil {
			return err
		}
	}
	for round := range b.o.rounds {
		for i, c := range cases {
			err := inTurn(round+i,
				func() error {
					r, err := b.wrkOnce(off, c.path, ss[i].off, b.o.threads, b.o.conns, b.o.duration)
					c.offRPS, c.offCPU = append(c.offRPS, r.res.rps), append(c.offCPU, us(r.cpuPerReq))
					return err
				},
				func() error {
					r, err := b.wrkOnce(on, c.path, ss[i].on, b.o.threads, b.o.conns, b.o.duration)
					c.onRPS, c.onCPU = append(c.onRPS, r.res.rps), append(c.onCPU, us(r.cpuPerReq))
					return err
				})
			if err != nil {
				return err
			}
			n := len(c.offRPS) - 1
			c.ratios = append(c.ratios, c.onRPS[n]/c.offRPS[n])
			fmt.Fprintf(os.Stderr, "round %d %-22s off %8.0f rps %6.1f µs  on %8.0f rps %6.1f µs  ratio %.3f\n", round+1, c.name,
				c.offRPS[n], c.offCPU[n], c.onRPS[n], c.onCPU[n], c.ratios[n])
		}
	}
	b.rep.attribution = cases
	return nil
}

// appendLuaHeader adds one request header to a wrk script luaScript wrote.
func appendLuaHeader(script, name, value string) error {
	f, err := os.OpenFile(script, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "wrk.headers[%q] = %q\n", name, value); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printAttribution writes the attribution phase's rows.
func printAttribution(w *tabwriter.Writer, cases []*attributionCase) {
	fmt.Fprintln(w, "tags and end users recorded vs none\toff rps\ton rps\tratio (median)\tratio range\tCPU µs off/on\tCPU added\ttarget >= 0.97\t")
	for _, c := range cases {
		lo, hi := minmax(c.ratios)
		cOff, cOn := median(c.offCPU), median(c.onCPU)
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.3f\t%.2f–%.2f\t%.1f / %.1f\t%+.1f%%\t%s\t\n", c.name, median(c.offRPS), median(c.onRPS),
			median(c.ratios), lo, hi, cOff, cOn, 100*(cOn-cOff)/cOff, verdict(median(c.ratios) >= 0.97))
	}
	fmt.Fprintln(w, "\t\t\t\t\t\t\t\t")
}

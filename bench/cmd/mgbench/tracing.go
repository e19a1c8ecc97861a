package main

import (
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
)

// tracingCase is one route measured with tracing off and on.
type tracingCase struct {
	name          string
	offRPS, onRPS []float64
	ratios        []float64 // on rps / off rps, per round
	offCPU, onCPU []float64 // µs per request
}

// tracingTarget is the least share of its untraced throughput modelgate keeps with every
// request traced.
const tracingTarget = 0.95

// tracing compares the running modelgate (tracing off) with a second one that traces every
// request (OTEL_TRACES_SAMPLER=traceidratio, ratio 1.0) and exports over OTLP/HTTP to the
// benchmark upstream, which drops the exports. wrk alternates between the two, as in the
// throughput phase.
func (b *bench) tracing() error {
	env := append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + b.up.url,
		"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=1.0",
		"OTEL_SERVICE_NAME=modelgate-bench"}, b.mode.tracingEnv()...)
	on, err := b.startModelgate("modelgate-traced", false, env...)
	if err != nil {
		return err
	}
	cases := bodyRoutes()[:4] // Responses and chat
	scripts := make([]string, len(cases))
	for i, c := range cases {
		if scripts[i], err = luaScript(b.o.workDir, "tr-"+strconv.Itoa(i), benchKey, c.body, nil); err != nil {
			return err
		}
		for _, p := range []*proc{b.mg, on} {
			if err := warmUp(p, c.path, scripts[i], b.o.threads, b.o.conns); err != nil {
				return err
			}
		}
	}
	for _, c := range cases {
		b.rep.tracing = append(b.rep.tracing, &tracingCase{name: c.name})
	}
	for round := range b.o.rounds {
		for i, c := range cases {
			tc := b.rep.tracing[i]
			procs := []*proc{b.mg, on}
			if (round+i)%2 == 1 {
				procs[0], procs[1] = procs[1], procs[0]
			}
			for _, p := range procs {
				r, err := b.wrkOnce(p, c.path, scripts[i], b.o.threads, b.o.conns, b.o.duration)
				if err != nil {
					return err
				}
				if p == on {
					tc.onRPS, tc.onCPU = append(tc.onRPS, r.res.rps), append(tc.onCPU, us(r.cpuPerReq))
				} else {
					tc.offRPS, tc.offCPU = append(tc.offRPS, r.res.rps), append(tc.offCPU, us(r.cpuPerReq))
				}
			}
			n := len(tc.onRPS) - 1
			tc.ratios = append(tc.ratios, tc.onRPS[n]/tc.offRPS[n])
			fmt.Fprintf(os.Stderr, "round %d %-28s tracing off %8.0f rps %6.1f µs CPU  on %8.0f rps %6.1f µs CPU  ratio %.3f\n",
				round+1, c.name, tc.offRPS[n], tc.offCPU[n], tc.onRPS[n], tc.onCPU[n], tc.ratios[n])
		}
	}
	return nil
}

func printTracing(w *tabwriter.Writer, cases []*tracingCase) {
	fmt.Fprintln(w, "tracing on (ratio 1.0, OTLP/HTTP) vs off\toff rps\ton rps\ton/off (median)\tratio range\tCPU µs off/on\ttarget\t")
	for _, c := range cases {
		lo, hi := minmax(c.ratios)
		r := median(c.ratios)
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.3f\t%.2f–%.2f\t%.1f / %.1f\t>= %.2f %s\t\n", c.name, median(c.offRPS), median(c.onRPS), r, lo, hi,
			median(c.offCPU), median(c.onCPU), tracingTarget, verdict(r >= tracingTarget))
	}
	fmt.Fprintln(w, "\t\t\t\t\t\t\t")
}

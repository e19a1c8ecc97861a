package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

type report struct {
	opts       options
	started    time.Time
	throughput []*scenario
	latency    []*latencyCase
	events     []*eventCase
	memory     []memoryResult
	overhead   []overheadResult
	tracing    []*tracingCase
	pairs      []*pairComparison // two modelgates differing in one setting (store, attribution)
	wsDelays   []*wsDelayCase
	wsLoop     *wsLoopCase
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

func (r *report) print(out io.Writer) {
	o := r.opts
	fmt.Fprintf(out, "\nmodelgate vs floor (httputil.ReverseProxy) vs direct — %d interleaved rounds, medians over rounds\n", o.rounds)
	fmt.Fprintf(out, "wrk -t%d -c%d -d%s for throughput, -t1 -c1 -d%s for latency; %s\n\n", o.threads, o.conns, o.duration, o.latDuration, time.Since(r.started).Round(time.Second))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if len(r.throughput) > 0 {
		fmt.Fprintln(w, "throughput\tfloor rps\tmodelgate rps\tratio (median)\tratio range\ttarget\t\t")
		for _, s := range r.throughput {
			lo, hi := minmax(s.ratios)
			fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.3f\t%.2f–%.2f\t>= %.2f\t%s\t\n", s.name, median(s.flrRPS), median(s.mgRPS), median(s.ratios), lo, hi, s.target, verdict(median(s.ratios) >= s.target))
		}
		fmt.Fprintln(w, "\t\t\t\t\t\t\t")
		fmt.Fprintln(w, "CPU per request (µs, /proc stat)\tfloor\tmodelgate\tmodelgate/floor\tload p50 floor\tload p50 mg\ttarget 150\t")
		for _, s := range r.throughput {
			m := median(s.mgCPU)
			fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.2f\t%.0f µs\t%.0f µs\t%s\t\n", s.name, median(s.flrCPU), m, m/median(s.flrCPU), median(s.flrP50), median(s.mgP50), verdict(m <= 150))
		}
		fmt.Fprintln(w, "\t\t\t\t\t\t\t")
	}
	w.Flush()
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if len(r.latency) > 0 {
		fmt.Fprintln(w, "latency @1 conn (µs)\tdirect p50/p99\tfloor p50/p99\tmodelgate p50/p99\tadded p50\tadded p99\ttarget p99 150\t")
		for _, l := range r.latency {
			a99 := median(l.addedP99)
			fmt.Fprintf(w, "%s\t%.0f / %.0f\t%.0f / %.0f\t%.0f / %.0f\t%.0f\t%.0f\t%s\t\n", l.name,
				median(l.direct[0]), median(l.direct[1]), median(l.floor[0]), median(l.floor[1]), median(l.mg[0]), median(l.mg[1]),
				median(l.addedP50), a99, verdict(a99 <= 150))
		}
		fmt.Fprintln(w, "\t\t\t\t\t\t\t")
	}
	if len(r.events) > 0 {
		fmt.Fprintf(w, "per-event delay, upstream stamp → client (µs, %d streams at a time)\tp50\tp99\tmax\tevents\ttarget p99 500\t\t\n", o.tickStreams)
		for _, e := range r.events {
			p99 := median(e.p99)
			v := ""
			if strings.HasPrefix(e.name, "modelgate") {
				v = verdict(p99 <= 500)
			}
			fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t%d\t%s\t\t\n", e.name, median(e.p50), p99, e.max, e.events, v)
		}
		fmt.Fprintln(w, "\t\t\t\t\t\t\t")
	}
	if len(r.memory) > 0 {
		runs := len(r.memory[0].peaks)
		head := "memory (fresh process each)"
		if runs > 1 {
			head = fmt.Sprintf("memory (fresh process each, median of %d runs)", runs)
		}
		fmt.Fprintln(w, head+"\tRSS before\tRSS peak\tgrowth\ttarget\t\tpeak range\t")
		for _, m := range r.memory {
			target, ok := "", true
			switch {
			case strings.HasPrefix(m.name, "modelgate") && strings.Contains(m.name, "streams"):
				target, ok = "peak <= 64 MB", m.peak() <= 64<<20
			case strings.HasPrefix(m.name, "modelgate") && strings.Contains(m.name, "upload"):
				target, ok = "growth <= 16 MB", m.growth() <= 16<<20
			}
			v := ""
			if target != "" {
				v = verdict(ok)
			}
			spread := ""
			if runs > 1 {
				spread = mb(slices.Min(m.peaks)) + "–" + mb(slices.Max(m.peaks))
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.name, mb(m.base()), mb(m.peak()), mb(m.growth()), target, v, spread)
		}
		fmt.Fprintln(w, "\t\t\t\t\t\t\t")
	}
	if len(r.tracing) > 0 {
		printTracing(w, r.tracing)
	}
	for _, c := range r.pairs {
		c.print(w)
	}
	if r.wsLoop != nil {
		printWebSocket(w, r.wsDelays, r.wsLoop)
	}
	if len(r.overhead) > 0 {
		fmt.Fprintln(w, "x-modelgate-overhead-ms (µs, 500 sequential)\tp50\tp99\t\t\t\t\t")
		for _, h := range r.overhead {
			fmt.Fprintf(w, "%s\t%.0f\t%.0f\t\t\t\t\t\n", h.name, h.p50, h.p99)
		}
	}
	w.Flush()
}

func minmax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// run1 is one wrk run against one process with its CPU accounting around it.
type run1 struct {
	res       wrkResult
	cpuPerReq time.Duration
}

// failedTries is how many times a measurement whose requests failed is taken again before the
// run stops. On a shared 2-core box a host stall now and then makes the floor (stdlib
// httputil.ReverseProxy) cut a handful of bodies mid-copy ("use of closed network connection"
// in floor.log, read errors in wrk); one such run used to throw away minutes of rounds. The
// retried measurement is printed, so a process that fails again and again still shows.
const failedTries = 2

func (b *bench) wrkOnce(p *proc, path, script string, threads, conns int, d time.Duration) (run1, error) {
	return retryFailed(func() (run1, error) { return b.wrkTry(p, path, script, threads, conns, d) },
		func(f *failedRun) {
			fmt.Fprintf(os.Stderr, "retry %s %s: %d socket errors, %d non-2xx in %d requests\n",
				f.name, f.path, f.res.sockErrs, f.res.non2xx, f.res.requests)
		})
}

// retryFailed runs measure until it returns anything but a failedRun, or failedTries more
// times, telling note of each failed run it takes again.
func retryFailed(measure func() (run1, error), note func(*failedRun)) (run1, error) {
	for try := 0; ; try++ {
		r, err := measure()
		var failed *failedRun
		if !errors.As(err, &failed) || try == failedTries {
			return r, err
		}
		note(failed)
	}
}

// failedRun is a wrk run that completed but measured failures.
type failedRun struct {
	name, path string
	res        wrkResult
}

func (f *failedRun) Error() string {
	return fmt.Sprintf("%s %s: failed requests:\n%s", f.name, f.path, f.res.raw)
}

func (b *bench) wrkTry(p *proc, path, script string, threads, conns int, d time.Duration) (run1, error) {
	c0, err := cpuTime(p.pid())
	if err != nil {
		return run1{}, err
	}
	res, err := runWrk(script, p.url+path, threads, conns, d)
	if err != nil {
		return run1{}, err
	}
	c1, err := cpuTime(p.pid())
	if err != nil {
		return run1{}, err
	}
	// A request cut by wrk stopping at the deadline can show as a socket error; more than a
	// trace of them, or any non-2xx answer, means the run measured failures.
	if res.non2xx > 0 || res.sockErrs*1000 > res.requests {
		return run1{}, &failedRun{name: p.name, path: path, res: res}
	}
	r := run1{res: res}
	if res.requests > 0 {
		r.cpuPerReq = (c1 - c0) / time.Duration(res.requests)
	}
	return r, nil
}

// warmUp runs wrk for a second to warm connection pools, page cache and the Go heap. Its
// figures are thrown away, and so are the few requests a one-second run cuts at its end
// (wrk counts them as read errors, and in a run this short they can pass the trace that
// wrkOnce tolerates); a run that cannot start at all is still an error.
func warmUp(p *proc, path, script string, threads, conns int) error {
	_, err := runWrk(script, p.url+path, threads, conns, time.Second)
	return err
}

// side is what one process measured in a throughput scenario, one entry per round.
type side struct {
	rps, cpu, p50 []float64 // requests per second; µs of CPU per request; µs p50 under load
}

// measure runs wrk once against p and appends what it measured to s.
func (b *bench) measure(s *side, p *proc, path, script string) error {
	r, err := b.wrkOnce(p, path, script, b.o.threads, b.o.conns, b.o.duration)
	s.rps = append(s.rps, r.res.rps)
	s.cpu = append(s.cpu, us(r.cpuPerReq))
	s.p50 = append(s.p50, us(r.res.p50))
	return err
}

type scenario struct {
	name            string
	mgPath          string
	mgBody, flrBody []byte
	target          float64
	mg, flr         side // with --baseline, mg is the candidate: the work tree's build
	ratios          []float64
	base            *baselineSide // --baseline only
}

// throughputScripts are a scenario's wrk scripts: through modelgate, and through the floor.
type throughputScripts struct{ mg, flr string }

func (b *bench) throughput() error {
	scs := []*scenario{
		{name: "/v1/responses", mgPath: "/v1/responses", mgBody: respBody, flrBody: respBody, target: 1.00},
		{name: "/v1/responses stream", mgPath: "/v1/responses", mgBody: respStreamBody, flrBody: respStreamBody, target: 1.00},
		{name: "/v1/chat/completions", mgPath: "/v1/chat/completions", mgBody: chatBody, flrBody: upstreamEquivalent(chatBody), target: 0.90},
		{name: "/v1/chat/completions stream", mgPath: "/v1/chat/completions", mgBody: chatStreamBody, flrBody: upstreamEquivalent(chatStreamBody), target: 0.90},
		{name: "/v1/messages", mgPath: "/v1/messages", mgBody: msgsBody, flrBody: upstreamEquivalentMessages(msgsBody), target: 0.90},
		{name: "/v1/messages stream", mgPath: "/v1/messages", mgBody: msgsStreamBody, flrBody: upstreamEquivalentMessages(msgsStreamBody), target: 0.90},
		{name: "/v1beta generateContent", mgPath: gemPath, mgBody: gemBody, flrBody: upstreamEquivalentGemini(gemBody, false), target: 0.90},
		{name: "/v1beta streamGenerateContent", mgPath: gemStreamPath, mgBody: gemBody, flrBody: upstreamEquivalentGemini(gemBody, true), target: 0.90},
	}
	scs = slices.DeleteFunc(scs, func(s *scenario) bool { return !b.o.wanted(s.name) })
	sc := make([]throughputScripts, len(scs))
	for i, s := range scs {
		var err error
		if sc[i].mg, err = luaScript(b.o.workDir, "tp-mg-"+strconv.Itoa(i), benchKey, s.mgBody, nil); err != nil {
			return err
		}
		if sc[i].flr, err = luaScript(b.o.workDir, "tp-floor-"+strconv.Itoa(i), "caller-key", s.flrBody, nil); err != nil {
			return err
		}
		// Warm the floor up: connection pools, page cache, the Go heap.
		if err := warmUp(b.flr, "/v1/responses", sc[i].flr, b.o.threads, b.o.conns); err != nil {
			return err
		}
	}
	if b.o.baseline != "" {
		return b.throughputAgainstBaseline(scs, sc)
	}
	for i, s := range scs {
		if err := warmUp(b.mg, s.mgPath, sc[i].mg, b.o.threads, b.o.conns); err != nil {
			return err
		}
	}
	for round := range b.o.rounds {
		for i, s := range scs {
			err := inTurn(round+i,
				func() error { return b.measure(&s.flr, b.flr, "/v1/responses", sc[i].flr) },
				func() error { return b.measure(&s.mg, b.mg, s.mgPath, sc[i].mg) })
			if err != nil {
				return err
			}
			n := len(s.mg.rps) - 1
			s.ratios = append(s.ratios, s.mg.rps[n]/s.flr.rps[n])
			fmt.Fprintf(os.Stderr, "round %d %-28s floor %8.0f rps  modelgate %8.0f rps  ratio %.3f\n", round+1, s.name, s.flr.rps[n], s.mg.rps[n], s.ratios[n])
		}
	}
	b.rep.throughput = scs
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

type latencyCase struct {
	name               string
	direct, floor, mg  [2][]float64 // p50, p99 in µs per round
	addedP50, addedP99 []float64
}

func (b *bench) latency() error {
	cases := []struct {
		name           string
		mgPath         string
		mgBody, upBody []byte
	}{
		{"/v1/responses", "/v1/responses", respBody, respBody},
		{"/v1/chat/completions", "/v1/chat/completions", chatBody, upstreamEquivalent(chatBody)},
		{"/v1/messages", "/v1/messages", msgsBody, upstreamEquivalentMessages(msgsBody)},
		{"/v1beta generateContent", gemPath, gemBody, upstreamEquivalentGemini(gemBody, false)},
	}
	for ci, c := range cases {
		if !b.o.wanted(c.name) {
			continue
		}
		up, err := luaScript(b.o.workDir, "lat-up-"+strconv.Itoa(ci), platformKey, c.upBody, nil)
		if err != nil {
			return err
		}
		mg, err := luaScript(b.o.workDir, "lat-mg-"+strconv.Itoa(ci), benchKey, c.mgBody, nil)
		if err != nil {
			return err
		}
		lc := &latencyCase{name: c.name}
		targets := []struct {
			p      *proc
			path   string
			script string
			into   *[2][]float64
		}{
			{b.up, "/v1/responses", up, &lc.direct},
			{b.flr, "/v1/responses", up, &lc.floor},
			{b.mg, c.mgPath, mg, &lc.mg},
		}
		for _, t := range targets {
			if err := warmUp(t.p, t.path, t.script, 1, 1); err != nil {
				return err
			}
		}
		for round := range b.o.rounds {
			for k := range targets {
				t := targets[(k+round)%len(targets)]
				r, err := b.wrkOnce(t.p, t.path, t.script, 1, 1, b.o.latDuration)
				if err != nil {
					return err
				}
				t.into[0] = append(t.into[0], us(r.res.p50))
				t.into[1] = append(t.into[1], us(r.res.p99))
			}
			n := len(lc.mg[0]) - 1
			lc.addedP50 = append(lc.addedP50, lc.mg[0][n]-lc.direct[0][n])
			lc.addedP99 = append(lc.addedP99, lc.mg[1][n]-lc.direct[1][n])
			fmt.Fprintf(os.Stderr, "round %d %-22s p50/p99 µs: direct %.0f/%.0f floor %.0f/%.0f modelgate %.0f/%.0f\n", round+1, c.name,
				lc.direct[0][n], lc.direct[1][n], lc.floor[0][n], lc.floor[1][n], lc.mg[0][n], lc.mg[1][n])
		}
		b.rep.latency = append(b.rep.latency, lc)
	}
	return nil
}

type eventCase struct {
	name     string
	p50, p99 []float64 // µs per round
	max      float64
	events   int
}

func (b *bench) events() error {
	targets := []target{
		{name: "direct (upstream)", url: b.up.url + "/v1/responses", key: platformKey, body: ticksBody, mode: b.mode},
		{name: "floor", url: b.flr.url + "/v1/responses", key: "caller-key", body: ticksBody},
		{name: "modelgate /v1/responses", url: b.mg.url + "/v1/responses", key: benchKey, body: ticksBody},
		{name: "modelgate /v1/chat/completions", url: b.mg.url + "/v1/chat/completions", key: benchKey, body: ticksChatBody, chat: true},
		{name: "modelgate /v1/messages", url: b.mg.url + "/v1/messages", key: benchKey, body: ticksMsgsBody, messages: true},
		{name: "modelgate /v1beta streamGenerateContent", url: b.mg.url + gemTicksPath, key: benchKey, body: ticksGemBody, gemini: true},
	}
	// direct and floor are the references: they stay whatever --routes selects.
	targets = slices.DeleteFunc(targets, func(t target) bool { return strings.HasPrefix(t.name, "modelgate") && !b.o.wanted(t.name) })
	cases := make([]*eventCase, len(targets))
	for i, t := range targets {
		cases[i] = &eventCase{name: t.name}
	}
	for round := range b.o.rounds {
		for k := range targets {
			i := (k + round) % len(targets)
			ds, err := eventDelays(targets[i], b.o.tickStreams)
			if err != nil {
				return err
			}
			c := cases[i]
			c.p50 = append(c.p50, us(percentile(ds, 50)))
			c.p99 = append(c.p99, us(percentile(ds, 99)))
			c.max = max(c.max, us(percentile(ds, 100)))
			c.events += len(ds)
		}
	}
	b.rep.events = cases
	return nil
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// overheadHeader samples x-modelgate-overhead-ms from a modelgate with the header on.
func (b *bench) overheadHeader() error {
	p, err := b.startModelgate("mg-overhead", true)
	if err != nil {
		return err
	}
	defer p.stop()
	client := &http.Client{}
	for _, c := range bodyRoutes() {
		var vals []float64
		for range 500 {
			resp, err := post(context.Background(), client, target{url: p.url + c.path, key: benchKey, body: c.body})
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			v, err := strconv.ParseFloat(resp.Header.Get("X-Modelgate-Overhead-Ms"), 64)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: no usable x-modelgate-overhead-ms header (%q)\n", c.name, resp.Header.Get("X-Modelgate-Overhead-Ms"))
				break
			}
			vals = append(vals, v*1000)
		}
		if len(vals) > 0 {
			b.rep.overhead = append(b.rep.overhead, overheadResult{name: c.name, p50: median(vals), p99: pct(vals, 99)})
		}
	}
	return nil
}

type overheadResult struct {
	name     string
	p50, p99 float64 // µs
}

func pct(xs []float64, p float64) float64 {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x * 1000)
	}
	return float64(percentile(ds, p)) / 1000
}

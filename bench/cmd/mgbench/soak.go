package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// soakSample is modelgate's RSS at one moment of the soak, and how many streams were open.
type soakSample struct {
	at   time.Duration
	rss  int64
	goal int64 // the GC goal (0: not read)
	open int64
}

// soakResult is the soak phase's record.
type soakResult struct {
	streams                int
	store                  string // responses.store
	duration, warmUp       time.Duration
	skipped                string
	base                   int64
	samples                []soakSample
	opened, closed, errors int64
	firstErr               string
}

// soak gaps: how often RSS is sampled, and how long a client stays (uniform in the range).
const (
	soakSampleEvery = 10 * time.Second
	soakStayMin     = 20 * time.Second
	soakStayMax     = 120 * time.Second
)

// soakWarmUp is the part of a soak left out of the slope: the first 20% of the run, at most
// two minutes (the two agree at the default ten minutes), but no less than the longest stay
// while that is under half the run. Every client opens at the start, so until the first of
// them have all left and been replaced, the streams are younger than they will be from then
// on, and the heap is still growing into the mix of a turnover (a 2,000-stream soak on h2:
// RSS 120 MB at 10 s, 164 MB at 110 s, then flat).
func soakWarmUp(d time.Duration) time.Duration {
	return min(max(soakStayMax, min(2*time.Minute, d/5)), d/2)
}

// soakStoreYAML is the soak modelgate's responses block. With "off" (the default) no
// response is kept: the soak then measures what open streams leave behind. A kept
// response's cost is the store phase's to measure, and it is bounded by the per-team cap
// (responses.store_max_per_team), which the soak's stream rate fills only near the end of
// the warm-up (10,000 at about 70 ended streams a second), so with "local" the slope also
// holds the store filling up.
func soakStoreYAML(store string) (string, error) {
	switch store {
	case "off", "local":
		return "responses:\n  store: \"" + store + "\"\n", nil
	}
	return "", fmt.Errorf("--soak-store %q: want off or local", store)
}

// soak holds --soak-streams bench-slow streams (one event a second, from an upstream of its
// own) through a fresh modelgate for --soak-duration. Each client stays 20–120 s, then leaves
// and another takes its place. RSS is sampled every 10 s; the report gives its slope after
// the warm-up, which should be flat.
func (b *bench) soak() error {
	r := &soakResult{streams: b.o.soakStreams, store: b.o.soakStore, duration: b.o.soakFor, warmUp: soakWarmUp(b.o.soakFor)}
	b.rep.soak = r
	storeYAML, err := soakStoreYAML(r.store)
	if err != nil {
		return err
	}
	if !b.fitsDescriptors(r.streams) {
		r.skipped = "descriptors"
		return nil
	}
	up, err := b.startUpstream("upstream-soak", time.Second)
	if err != nil {
		return err
	}
	defer up.stop()
	p, err := b.startModelgateTo(up, "mg-soak", false, storeYAML)
	if err != nil {
		return err
	}
	defer p.stop()
	runtimeSettle()
	if r.base, err = rssBytes(p.pid()); err != nil {
		return err
	}
	t := target{name: "soak", url: p.url + "/v1/responses", key: benchKey, body: slowBody}
	client := newClient(t, r.streams)
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), r.duration)
	defer cancel()
	var open atomic.Int64
	var errMu sync.Mutex
	sem := make(chan struct{}, openWave)
	start := time.Now()
	var wg sync.WaitGroup
	for range r.streams {
		wg.Go(func() {
			for ctx.Err() == nil {
				stay := soakStayMin + rand.N(soakStayMax-soakStayMin)
				err := soakClient(ctx, client, t, stay, sem, &open)
				switch {
				case err != nil && ctx.Err() == nil:
					errMu.Lock()
					r.errors++
					if r.firstErr == "" {
						r.firstErr = err.Error()
					}
					errMu.Unlock()
					time.Sleep(100 * time.Millisecond) // a failing modelgate is not hammered
				case err == nil:
					errMu.Lock()
					r.opened++
					if ctx.Err() == nil {
						r.closed++
					}
					errMu.Unlock()
				}
			}
		})
	}
	tick := time.NewTicker(soakSampleEvery)
	defer tick.Stop()
	mc := metricsClient()
	for sampling := true; sampling; {
		if rss, err := rssBytes(p.pid()); err == nil {
			goal, _ := gcGoal(mc, p.url) // a sample without it still has its RSS
			r.samples = append(r.samples, soakSample{at: time.Since(start), rss: rss, goal: goal, open: open.Load()})
			fmt.Fprintf(os.Stderr, "[%s] soak %4.0fs  RSS %s  GC goal %s  open %d\n", b.mode.name, time.Since(start).Seconds(), mb(rss), mb(goal), open.Load())
		}
		select {
		case <-ctx.Done():
			sampling = false
		case <-tick.C:
		}
	}
	wg.Wait()
	return nil
}

// soakClient opens one stream, holds it for stay (reading every event), and leaves. A stream
// that was opened returns nil, however it ended.
func soakClient(ctx context.Context, client *http.Client, t target, stay time.Duration, sem chan struct{}, open *atomic.Int64) error {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	released := false
	release := func() {
		if !released {
			released = true
			<-sem
		}
	}
	defer release()
	sctx, cancel := context.WithTimeout(ctx, stay)
	defer cancel()
	resp, err := post(sctx, client, t)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := readEvent(br); err != nil {
		return err
	}
	release()
	open.Add(1)
	defer open.Add(-1)
	// Until the stay ends (or the stream does): an error before then is modelgate cutting it.
	if _, err := io.Copy(io.Discard, br); err != nil && sctx.Err() == nil {
		return fmt.Errorf("stream cut: %w", err)
	}
	return nil
}

// slope is the least-squares slope of RSS over the samples taken after the warm-up, in
// bytes per ten minutes.
func (r *soakResult) slope() float64 { return r.slopeOf(func(s soakSample) int64 { return s.rss }) }

// goalSlope is slope for the GC goal, over the samples that have it.
func (r *soakResult) goalSlope() float64 {
	return r.slopeOf(func(s soakSample) int64 { return s.goal })
}

func (r *soakResult) slopeOf(value func(soakSample) int64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, s := range r.afterWarmUp() {
		if value(s) == 0 {
			continue
		}
		x := s.at.Minutes() / 10
		y := float64(value(s))
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func (r *soakResult) afterWarmUp() []soakSample {
	for i, s := range r.samples {
		if s.at >= r.warmUp {
			return r.samples[i:]
		}
	}
	return nil
}

func (r *soakResult) print(w io.Writer, mode string) {
	if r.skipped != "" {
		fmt.Fprintf(w, "%s\t%s\t\t\t\t\t\t\t\t\t\t\n", mode, r.skipped)
		return
	}
	after := r.afterWarmUp()
	lo, hi, last := int64(0), int64(0), int64(0)
	var rss []float64
	for i, s := range after {
		if i == 0 || s.rss < lo {
			lo = s.rss
		}
		hi = max(hi, s.rss)
		last = s.rss
		rss = append(rss, float64(s.rss))
	}
	sl, gl := r.slope(), r.goalSlope()
	lastGoal := int64(0)
	if len(after) > 0 {
		lastGoal = after[len(after)-1].goal
	}
	fmt.Fprintf(w, "%s\t%s\t%s / %s / %s / %s\t%+.2f MB\t%s\t%s\t%+.2f MB\t%s\t%d / %d\t%d\t%s\t\n", mode, mb(r.base),
		mb(lo), mb(int64(median(rss))), mb(hi), mb(last), sl/(1<<20), verdict(sl < 1<<20),
		mb(lastGoal), gl/(1<<20), verdict(gl < 1<<20), r.opened, r.closed, r.errors, r.firstErr)
}

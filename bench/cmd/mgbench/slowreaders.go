package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// floodBody asks benchup for a stream of 16 KB deltas sent as fast as the reader takes them.
var floodBody = []byte(`{"model":"bench-flood","input":"flood","stream":true}`)

// slowReaderCap is what one slow reader may make modelgate hold: the HTTP/2 stream window
// (platform.StreamReceiveWindow, docs/configuration.md upstream.http2) and an allowance for
// the relay's buffers (the event being written and the SSE reader's buffer).
const (
	streamWindow   = 256 << 10
	relayAllowance = 64 << 10 // an assumption of this benchmark: the documented cap names the window only
	slowReaderCap  = streamWindow + relayAllowance
)

// slowReadersCase is the slowreaders phase's result: the normal streams' per-event delay
// without and with the slow readers beside them, per round, and modelgate's RSS.
type slowReadersCase struct {
	normal, slow          int
	tickGap               time.Duration
	p50, p99              [2][]float64 // µs per round; [0] without, [1] with
	base                  int64        // a fresh modelgate, settled
	slowOnly              int64        // with the slow readers open and stalled, nothing else
	perStream             int64        // what a stream that reads costs, on a modelgate of its own
	peakWithout, peakWith []int64
}

// Normal streams in the slowreaders phase: 1,000 of them at the events phase's 2 ms would
// ask 500,000 events a second of two cores, and measure only the queue that makes. At 100
// ms, 50 deltas (5 s a stream), they ask 10,000, and their starts are spread over one gap
// so that their deltas do not all fall due at once.
const (
	slowPhaseTicks   = 50
	slowPhaseTickGap = 100 * time.Millisecond
)

// slowReadersPhase runs --normal-streams bench-ticks streams through a fresh modelgate, in
// rounds alternately alone and beside --slow-readers clients that each opened a bench-flood
// stream and read nothing after its first event. A slow reader must pause its own stream
// only: the normal streams' delay should not move, and modelgate should hold at most the
// stream window and its relay buffers for each slow reader. The phase has an upstream of its
// own (the normal streams' pace is its flag); both kinds of stream share it, and on HTTP/2
// share its connections.
func (b *bench) slowReadersPhase() error {
	up, err := b.startUpstream("upstream-slowreaders", 2*time.Second,
		"--ticks", fmt.Sprint(slowPhaseTicks), "--tick-gap", slowPhaseTickGap.String())
	if err != nil {
		return err
	}
	defer up.stop()
	p, err := b.startModelgateTo(up, "mg-slowreaders", false, "")
	if err != nil {
		return err
	}
	defer p.stop()
	c := &slowReadersCase{normal: b.o.normal, slow: b.o.slowReaders, tickGap: slowPhaseTickGap}
	b.rep.slowReaders = c
	// What as many streams that do read cost, on a fresh modelgate of their own: a slow
	// reader's share above it is what its unread answer makes modelgate hold.
	if c.perStream, err = b.streamCost(up, c.slow); err != nil {
		return err
	}
	runtimeSettle()
	if c.base, err = rssBytes(p.pid()); err != nil {
		return err
	}
	normal := target{name: "normal streams", url: p.url + "/v1/responses", key: benchKey, body: ticksBody}
	slow := target{name: "slow readers", url: p.url + "/v1/responses", key: benchKey, body: floodBody}
	client := newClient(slow, c.slow)
	defer client.CloseIdleConnections()
	openSlow := func() (*heldStreams, error) {
		held, err := openStreams(client, slow, c.slow, true)
		if err != nil {
			held.close()
			return nil, err
		}
		// The floods fill every buffer between benchup and the readers (the socket buffers
		// grow to megabytes each, which takes seconds of TLS and parsing on two cores) and
		// then stop: the measurement is of slow readers that have stalled, not of the fill.
		if err := waitQuiet(time.Minute, p.pid(), up.pid()); err != nil {
			held.close()
			return nil, err
		}
		return held, nil
	}
	// First, on the fresh process, the slow readers alone: what they make modelgate hold.
	held, err := openSlow()
	if err != nil {
		return err
	}
	c.slowOnly, err = rssBytes(p.pid())
	held.close()
	if err != nil {
		return err
	}
	measure := func(with int) error {
		if with == 1 {
			held, err := openSlow()
			if err != nil {
				return err
			}
			defer held.close()
		}
		peak := watchRSS(p.pid())
		ds, err := staggeredDelays(normal, c.normal, slowPhaseTickGap)
		top := peak()
		if err != nil {
			return err
		}
		c.p50[with] = append(c.p50[with], us(percentile(ds, 50)))
		c.p99[with] = append(c.p99[with], us(percentile(ds, 99)))
		if with == 1 {
			c.peakWith = append(c.peakWith, top)
		} else {
			c.peakWithout = append(c.peakWithout, top)
		}
		return nil
	}
	// One unmeasured pass of the normal streams, so the first round does not pay for pools
	// and heap growth.
	if _, err := staggeredDelays(normal, c.normal, slowPhaseTickGap); err != nil {
		return err
	}
	for round := range max(b.o.slowRounds, 1) {
		if err := inTurn(round, func() error { return measure(0) }, func() error { return measure(1) }); err != nil {
			return err
		}
		n := len(c.p99[1]) - 1
		fmt.Fprintf(os.Stderr, "[%s] round %d %d streams p50/p99 µs: alone %.0f/%.0f, beside %d slow readers %.0f/%.0f; RSS peak %s / %s\n",
			b.mode.name, round+1, c.normal, c.p50[0][n], c.p99[0][n], c.slow, c.p50[1][n], c.p99[1][n], mb(c.peakWithout[n]), mb(c.peakWith[n]))
	}
	return nil
}

// streamCost is the RSS growth per stream of n bench-slow streams through a fresh modelgate.
func (b *bench) streamCost(up *proc, n int) (int64, error) {
	p, err := b.startModelgateTo(up, "mg-slowreaders-ref", false, "")
	if err != nil {
		return 0, err
	}
	defer p.stop()
	base, peak, err := openStreamsRSS(p.pid(), target{name: p.name, url: p.url + "/v1/responses", key: benchKey, body: slowBody}, n)
	return (peak - base) / int64(max(n, 1)), err
}

// waitQuiet waits until the processes pids have used under 5% of a core each for a second,
// for at most limit.
func waitQuiet(limit time.Duration, pids ...int) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		before := make([]time.Duration, len(pids))
		for i, pid := range pids {
			before[i], _ = cpuTime(pid)
		}
		time.Sleep(time.Second)
		quiet := true
		for i, pid := range pids {
			if after, err := cpuTime(pid); err != nil || after-before[i] > 50*time.Millisecond {
				quiet = false
			}
		}
		if quiet {
			return nil
		}
	}
	return fmt.Errorf("still busy after %s", limit)
}

// watchRSS samples pid's RSS every 50 ms until the returned function is called, which
// returns the highest sample.
func watchRSS(pid int) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if r, err := rssBytes(pid); err == nil && r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(stop)
		wg.Wait()
		return peak.Load()
	}
}

func (c *slowReadersCase) print(w io.Writer, mode string) {
	p99a, p99b := median(c.p99[0]), median(c.p99[1])
	ratio := p99b / p99a
	perSlow := (c.slowOnly - c.base) / int64(max(c.slow, 1))
	held := perSlow - c.perStream
	fmt.Fprintf(w, "%s\t%.0f / %.0f\t%.0f / %.0f\t%.2f %s\t%s\t%s\t%s\t%s\t%s %s\t%s\t%s\t\n", mode,
		median(c.p50[0]), p99a, median(c.p50[1]), p99b, ratio, verdict(ratio <= 1.10),
		mb(c.base), mb(c.slowOnly), kb(perSlow), kb(c.perStream), kb(held), verdict(held <= slowReaderCap),
		mb(medianBytes(c.peakWithout)), mb(medianBytes(c.peakWith)))
}

func kb(n int64) string { return fmt.Sprintf("%.1f KB", float64(n)/1024) }

package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// memoryResult holds one check's RSS before and at its peak, one entry per run.
type memoryResult struct {
	name         string
	streams      int    // open streams in a stream check; 0 for the uploads
	skipped      string // why the check did not run ("descriptors"); empty when it did
	bases, peaks []int64
}

// base, peak and growth are medians over the runs: a single run swings by several MB with the
// order in which a burst of streams grow and free their stacks, the floor's as much as
// modelgate's (bench/README.md).
func (m memoryResult) base() int64 { return medianBytes(m.bases) }
func (m memoryResult) peak() int64 { return medianBytes(m.peaks) }
func (m memoryResult) growth() int64 {
	g := make([]int64, len(m.peaks))
	for i := range m.peaks {
		g[i] = m.peaks[i] - m.bases[i]
	}
	return medianBytes(g)
}

func medianBytes(xs []int64) int64 {
	f := make([]float64, len(xs))
	for i, x := range xs {
		f[i] = float64(x)
	}
	return int64(median(f))
}

// descriptorSpare is what a process holds besides its streams: listeners, logs, the store,
// idle pool connections.
const descriptorSpare = 100

// fitsDescriptors reports whether a proxy can hold n client streams in this mode: one
// descriptor for each client connection, and on h1 one more for each upstream connection.
func (b *bench) fitsDescriptors(n int) bool {
	return uint64(n*b.mode.descriptorsPerPair+descriptorSpare) <= b.rep.nofile
}

type memoryCheck struct {
	name    string
	streams int
	run     func() (int64, int64, error)
}

// memory runs each check on a freshly started process, so earlier load does not blur it.
func (b *bench) memory() error {
	var checks []memoryCheck
	for _, n := range b.o.streams {
		checks = append(checks, b.streamChecks(n)...)
	}
	checks = append(checks,
		memoryCheck{name: fmt.Sprintf("modelgate: %d MB asset upload", b.o.uploadBytes/1_000_000), run: func() (int64, int64, error) {
			p, err := b.startModelgate("mg-upload", true)
			if err != nil {
				return 0, 0, err
			}
			defer p.stop()
			return uploadRSS(p.pid(), p.url+"/api/open/v2/assets", benchKey, b.o.uploadBytes)
		}},
		memoryCheck{name: fmt.Sprintf("floor: %d MB asset upload", b.o.uploadBytes/1_000_000), run: func() (int64, int64, error) {
			p, err := b.startFloor("floor-upload")
			if err != nil {
				return 0, 0, err
			}
			defer p.stop()
			return uploadRSS(p.pid(), p.url+"/api/open/v2/assets", "caller-key", b.o.uploadBytes)
		}},
	)
	var run []int // the checks wanted, in report order
	for i, c := range checks {
		if !strings.HasPrefix(c.name, "modelgate") || b.o.wanted(c.name) {
			run = append(run, i)
		}
	}
	results := make([]memoryResult, len(checks))
	for i, c := range checks {
		results[i] = memoryResult{name: c.name, streams: c.streams}
		if c.streams > 0 && !b.fitsDescriptors(c.streams) {
			results[i].skipped = "descriptors"
		}
	}
	for r := range max(b.o.memoryRuns, 1) {
		order := slices.Clone(run)
		if r%2 == 1 { // alternate the order, so no check always runs first or last
			slices.Reverse(order)
		}
		for _, i := range order {
			c := checks[i]
			if results[i].skipped != "" {
				continue
			}
			base, peak, err := c.run()
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			fmt.Fprintf(os.Stderr, "[%s] %-40s base %s peak %s\n", b.mode.name, c.name, mb(base), mb(peak))
			results[i].bases = append(results[i].bases, base)
			results[i].peaks = append(results[i].peaks, peak)
		}
	}
	for _, i := range run {
		if results[i].skipped != "" {
			fmt.Fprintf(os.Stderr, "[%s] %-40s not run: %d streams need %d descriptors per stream, over the limit of %d\n",
				b.mode.name, results[i].name, results[i].streams, b.mode.descriptorsPerPair, b.rep.nofile)
		}
		b.rep.memory = append(b.rep.memory, results[i])
	}
	return b.overheadHeader()
}

// streamChecks are the memory checks at n open streams: modelgate's three streaming routes
// and the floor, each on a process of its own.
func (b *bench) streamChecks(n int) []memoryCheck {
	mgStreams := func(name, path string, body []byte) func() (int64, int64, error) {
		return func() (int64, int64, error) {
			p, err := b.startModelgate(name, true)
			if err != nil {
				return 0, 0, err
			}
			defer p.stop()
			return openStreamsRSS(p.pid(), target{name: p.name, url: p.url + path, key: benchKey, body: body}, n)
		}
	}
	return []memoryCheck{
		{fmt.Sprintf("modelgate: %d open /v1/responses streams", n), n, mgStreams("mg-streams", "/v1/responses", slowBody)},
		{fmt.Sprintf("modelgate: %d open chat streams", n), n, mgStreams("mg-chat-streams", "/v1/chat/completions", slowChatBody)},
		{fmt.Sprintf("modelgate: %d open /v1/messages streams", n), n, mgStreams("mg-messages-streams", "/v1/messages", slowMsgsBody)},
		{fmt.Sprintf("floor: %d open streams", n), n, func() (int64, int64, error) {
			p, err := b.startFloor("floor-streams")
			if err != nil {
				return 0, 0, err
			}
			defer p.stop()
			return openStreamsRSS(p.pid(), target{name: p.name, url: p.url + "/v1/responses", key: "caller-key", body: slowBody}, n)
		}},
	}
}

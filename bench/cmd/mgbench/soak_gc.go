package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The soak's second series: modelgate's GC goal, read from its /metrics. RSS alone cannot
// tell a leak from the heap filling up to its goal: with GOGC=100 a collection starts only
// when the heap nears twice what the last one left live (plus stacks), which with 5,000
// streams is every 75–100 s, and the pacer moves that start within the goal from cycle to
// cycle. RSS holds the highest heap any cycle reached (the runtime keeps idle pages that lie
// within the goal), so it rises in steps at collections and then stays, though what is live
// after each collection does not change (a 10-minute soak on h2: 118 MB live after every
// collection from 27 s on, RSS up 40 MB at 440 s when a collection started at 264 MB rather
// than 227). The goal is the live heap's own slope, doubled: a leak moves it, the pacer does not.

// nextGCMetric is the Go collector's gauge of the heap size the next collection aims at.
const nextGCMetric = "go_memstats_next_gc_bytes"

// parseNextGC finds nextGCMetric's value in a Prometheus text exposition.
func parseNextGC(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), nextGCMetric+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil || !(v >= 0 && v <= 1<<50) { // NaN fails both
			return 0, fmt.Errorf("%s: bad value %q", nextGCMetric, rest)
		}
		return int64(v), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New(nextGCMetric + " not in /metrics")
}

// gcGoal reads modelgate's GC goal from its /metrics.
func gcGoal(client *http.Client, base string) (int64, error) {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	return parseNextGC(io.LimitReader(resp.Body, 4<<20))
}

// metricsClient is the soak's own client for /metrics, apart from the streams' pool.
func metricsClient() *http.Client { return &http.Client{Timeout: 5 * time.Second} }

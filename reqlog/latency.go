package reqlog

import (
	"math"
	"time"
)

// Latency histogram of the health window: geometric buckets from 1 ms, each 25% wider than
// the last, so a percentile read from it is within a quarter of the true value from a
// millisecond to twenty minutes, in a fixed 64 counters however many requests it holds.
const (
	latencyBuckets = 64
	latencyFirstMs = 1.0
	latencyGrowth  = 1.25
)

// latencyHist counts durations by bucket; the last bucket takes everything longer.
type latencyHist [latencyBuckets]uint32

// bucketOf is the bucket a duration falls in: the first whose upper bound holds it.
func bucketOf(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= latencyFirstMs {
		return 0
	}
	i := int(math.Ceil(math.Log(ms/latencyFirstMs) / math.Log(latencyGrowth)))
	return min(max(i, 0), latencyBuckets-1)
}

// upperMs is bucket i's upper bound in milliseconds.
func upperMs(i int) float64 { return latencyFirstMs * math.Pow(latencyGrowth, float64(i)) }

func (h *latencyHist) add(d time.Duration) { h[bucketOf(d)]++ }

func (h *latencyHist) merge(o *latencyHist) {
	for i := range h {
		h[i] += o[i]
	}
}

// quantileMs is the q-quantile (0 < q <= 1) of the n durations counted, as the upper bound
// of the bucket it falls in, rounded to a tenth of a millisecond; 0 when n is 0.
func (h *latencyHist) quantileMs(q float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range h {
		seen += int64(c)
		if seen >= rank {
			return math.Round(upperMs(i)*10) / 10
		}
	}
	return math.Round(upperMs(latencyBuckets-1)*10) / 10
}

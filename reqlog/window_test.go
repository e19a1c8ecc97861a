package reqlog

import (
	"fmt"
	"testing"
	"time"
)

func TestLatencyQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ms       []int
		p50, p95 float64
	}{
		{"one fast", []int{1}, 1, 1},
		{"all 100ms", []int{100, 100, 100, 100}, 108.4, 108.4},
		{"one slow of twenty", append(make20(10), 5000), 11.6, 11.6},
		{"two slow of twenty", append(make20(10)[:18], 5000, 5000), 11.6, 6018.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h latencyHist
			for _, ms := range tc.ms {
				h.add(time.Duration(ms) * time.Millisecond)
			}
			n := int64(len(tc.ms))
			if got := h.quantileMs(0.5, n); got != tc.p50 {
				t.Errorf("p50 %v, want %v", got, tc.p50)
			}
			if got := h.quantileMs(0.95, n); got != tc.p95 {
				t.Errorf("p95 %v, want %v", got, tc.p95)
			}
		})
	}
}

func make20(ms int) []int {
	out := make([]int, 19)
	for i := range out {
		out[i] = ms
	}
	return out
}

// A bucket's upper bound is within 25% of every duration it holds.
func TestLatencyBucketBound(t *testing.T) {
	for _, d := range []time.Duration{time.Microsecond, 3 * time.Millisecond, 999 * time.Millisecond, 42 * time.Second, 10 * time.Minute} {
		up := upperMs(bucketOf(d))
		ms := float64(d) / float64(time.Millisecond)
		if up < ms || (ms > 1 && up > ms*1.25+1e-9) {
			t.Errorf("%v in a bucket up to %.3f ms", d, up)
		}
	}
}

func TestWindowFigures(t *testing.T) {
	start := time.Date(2026, 12, 6, 23, 30, 0, 0, time.UTC)
	w := NewWindow([]string{"big", "medium", "assistant"})
	obs := func(at time.Duration, s RequestSummary) { w.Observe(&s, start.Add(at)) }
	obs(0, RequestSummary{Team: "a", Key: "k1", Model: "big", ServedModel: "medium", Status: 200, Duration: 20 * time.Millisecond})
	w.Fallback("big", "medium", FallbackStatus5xx, start)
	obs(time.Minute, RequestSummary{Team: "a", Model: "assistant", UpstreamModel: "v1", Status: 200, Duration: 10 * time.Millisecond})
	obs(2*time.Minute, RequestSummary{Team: "b", Model: "assistant", UpstreamModel: "v2", Status: 502, UpstreamErr: "dial", Duration: 5 * time.Millisecond})
	obs(3*time.Minute, RequestSummary{Team: "b", Model: "made-up-by-a-client", Status: 404})
	obs(3*time.Minute, RequestSummary{Route: "/healthz", Status: 200}) // no model: not a model call
	// 70 minutes on: the first two calls left the hour, the day goes on.
	obs(70*time.Minute-time.Second, RequestSummary{Team: "a", Model: "big", Status: 200, Duration: 40 * time.Millisecond})

	snap := w.Snapshot(start.Add(70*time.Minute), "", RecentCap)
	got := map[string]string{}
	for _, m := range snap.Models {
		got[m.Model] = fmt.Sprintf("hour %d/%d today %d/%d p50 %v", m.Hour.Requests, m.Hour.Errors, m.Today.Requests, m.Today.Errors, m.Today.P50Ms)
	}
	// The clock crossed midnight at 23:30+30m: the day's figures start again there.
	if len(snap.Fallbacks) != 0 || len(snap.Routes) != 0 {
		t.Errorf("yesterday's fallbacks or routes kept: %+v %+v", snap.Fallbacks, snap.Routes)
	}
	if g := got["big"]; g != "hour 1/0 today 1/0 p50 44.4" {
		t.Errorf("big: %s", g)
	}
	if _, ok := got["assistant"]; ok {
		t.Errorf("assistant shown with nothing in the hour or today: %s", got["assistant"])
	}
	if len(snap.Recent) != 5 || snap.Recent[0].Model != "big" || snap.Recent[1].Model != "other" {
		t.Errorf("recent %+v", snap.Recent)
	}
	if b := w.Snapshot(start.Add(70*time.Minute), "b", 10).Recent; len(b) != 2 || b[0].Model != "other" || b[1].Status != 502 {
		t.Errorf("team b's recent: %+v", b)
	}
}

func TestWindowSameDay(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	w := NewWindow([]string{"big", "medium", "assistant"})
	for i, s := range []RequestSummary{
		{Model: "big", ServedModel: "medium", Status: 200, Duration: 100 * time.Millisecond},
		{Model: "assistant", UpstreamModel: "v1", Status: 200, Duration: 10 * time.Millisecond},
		{Model: "assistant", UpstreamModel: "v1", Status: 200, Duration: 10 * time.Millisecond},
		{Model: "assistant", UpstreamModel: "v2", Status: 503, Duration: 10 * time.Millisecond},
	} {
		w.Observe(&s, start.Add(time.Duration(i)*time.Second))
	}
	w.Fallback("big", "medium", FallbackStatus5xx, start)
	w.Fallback("big", "medium", FallbackStatus5xx, start)
	w.Fallback("big", "not-configured", FallbackBreakerOpen, start)
	snap := w.Snapshot(start.Add(time.Minute), "", 2)
	if fmt.Sprint(snap.Routes) != "[{assistant v1 2} {assistant v2 1}]" {
		t.Errorf("routes %v", snap.Routes)
	}
	if fmt.Sprint(snap.Fallbacks) != "[{big medium status_5xx 2} {big other breaker_open 1}]" {
		t.Errorf("fallbacks %v", snap.Fallbacks)
	}
	if len(snap.Models) != 2 || snap.Models[0].Model != "assistant" || snap.Models[0].Hour.ErrorRate != 0.3333 || snap.Models[0].Today.Requests != 3 {
		t.Errorf("models %+v", snap.Models)
	}
	if len(snap.Recent) != 2 || snap.Recent[0].Status != 503 {
		t.Errorf("recent %+v", snap.Recent)
	}
	w.SetModels([]string{"assistant"})
	if snap := w.Snapshot(start.Add(time.Minute), "", 0); len(snap.Models) != 1 {
		t.Errorf("a model removed by a reload still shown: %+v", snap.Models)
	}
}

// The ring keeps the newest RecentCap requests.
func TestWindowRecentRing(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	w := NewWindow([]string{"m"})
	for i := range RecentCap + 7 {
		w.Observe(&RequestSummary{Model: "m", Status: 200, InputTokens: int64(i)}, start)
	}
	r := w.Snapshot(start, "", RecentCap+50).Recent
	if len(r) != RecentCap || r[0].InputTokens != RecentCap+6 || r[len(r)-1].InputTokens != 7 {
		t.Errorf("%d kept, newest %d, oldest %d", len(r), r[0].InputTokens, r[len(r)-1].InputTokens)
	}
}

// BenchmarkWindowObserve is what every finished model call adds: one lock, a few counters,
// a row of the ring. RunParallel shows the lock shared by every request of the replica.
func BenchmarkWindowObserve(b *testing.B) {
	w := NewWindow([]string{"big", "medium"})
	s := RequestSummary{Route: "/v1/chat/completions", Team: "search", Key: "search-1", Model: "big", Status: 200, Duration: 40 * time.Millisecond}
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Observe(&s, at)
		}
	})
}

// Observing tells the window of a finished request before the observers it was given, and
// works without any.
func TestWindowObserving(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	w := NewWindow([]string{"big"})
	var seen []string
	hooks := w.Observing(Hooks{RequestDone: func(s RequestSummary) {
		if len(w.Snapshot(at, "", RecentCap).Recent) != 1 {
			t.Error("an observer heard of the request before the window")
		}
		seen = append(seen, s.Model)
	}}, func() time.Time { return at })
	hooks.RequestDone(RequestSummary{Team: "a", Model: "big", Status: 200})
	if len(seen) != 1 || seen[0] != "big" {
		t.Fatalf("observers heard %v", seen)
	}
	w.Observing(Hooks{}, func() time.Time { return at }).RequestDone(RequestSummary{Team: "a", Model: "big", Status: 200})
	if n := len(w.Snapshot(at, "", RecentCap).Recent); n != 2 {
		t.Fatalf("window holds %d recent requests, want 2", n)
	}
}

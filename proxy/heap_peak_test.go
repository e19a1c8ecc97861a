package proxy

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// heapPeakDuring samples the Go heap (live and not yet collected objects) every millisecond
// while f runs and returns the peak growth over the level after a collection just before it.
// f gets awaitSample, which returns once the sampler has read the heap after the call began:
// what f holds at that call is then in the peak, however late the sampler ran.
func heapPeakDuring(f func(awaitSample func())) (growth uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	peak := base
	var mu sync.Mutex
	// next is closed by the first sample to begin after it was handed out; handed says it
	// was, so that a sample nobody waits for makes no channel (no garbage in the figure).
	next, handed := make(chan struct{}), false
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			waiting := next
			if handed {
				next, handed = make(chan struct{}), false
			}
			mu.Unlock()
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			if waiting != next {
				close(waiting)
			}
		}
	}()
	f(func() {
		mu.Lock()
		ch := next
		handed = true
		mu.Unlock()
		<-ch
	})
	close(stop)
	<-done
	return peak - base
}

// TestHeapPeakDuringSeesAllocations shows the sampler would catch a buffered upload: holding
// 32 MiB until it has sampled must show up as at least that much growth.
//
// Collection is paused meanwhile (the helper's own runtime.GC still runs). Otherwise the
// figure is not only this test's: the baseline holds whatever other goroutines had live or
// not yet collected then (an earlier test's teardown, garbage allocated while that
// collection marked), and a collection started by the 32 MiB frees it before the sample,
// so 32 MiB read as 28 when 4 MB of someone else's went. With nothing freed, the heap
// moves only by allocations, and the 32 MiB show whole.
func TestHeapPeakDuringSeesAllocations(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var held []byte
	growth := heapPeakDuring(func(awaitSample func()) {
		held = make([]byte, 32<<20)
		for i := 0; i < len(held); i += 4096 {
			held[i] = 1
		}
		awaitSample() // the buffer is live until the sampler has seen it
	})
	runtime.KeepAlive(held)
	if growth < 32<<20 {
		t.Fatalf("sampler saw %d bytes of growth while 32 MiB were held", growth)
	}
}

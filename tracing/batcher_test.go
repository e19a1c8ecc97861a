package tracing

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// countingExporter records the size of every batch it is given.
type countingExporter struct {
	mu       sync.Mutex
	batches  []int
	exported chan struct{}
	shut     bool
}

func (c *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.mu.Lock()
	c.batches = append(c.batches, len(spans))
	c.mu.Unlock()
	select {
	case c.exported <- struct{}{}:
	default:
	}
	return nil
}

func (c *countingExporter) Shutdown(context.Context) error {
	c.mu.Lock()
	c.shut = true
	c.mu.Unlock()
	return nil
}

func (c *countingExporter) sizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.batches...)
}

func testSpans(n int, sampled bool) []sdktrace.ReadOnlySpan {
	flags := trace.TraceFlags(0)
	if sampled {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: flags})
	stubs := make(tracetest.SpanStubs, n)
	for i := range stubs {
		stubs[i] = tracetest.SpanStub{Name: "s", SpanContext: sc}
	}
	return stubs.Snapshots()
}

// The batcher follows OTEL_BSP_*: a full batch is exported at once (not after the schedule
// delay), a full queue drops, unsampled spans are not exported, and Shutdown exports the
// rest in batches no larger than the batch size.
func TestBatcherSettings(t *testing.T) {
	env := map[string]string{
		"OTEL_BSP_SCHEDULE_DELAY":        "600000", // never, within the test
		"OTEL_BSP_MAX_QUEUE_SIZE":        "10",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",
	}
	exp := &countingExporter{exported: make(chan struct{}, 1)}
	b := newBatcher(exp, func(k string) string { return env[k] })
	for _, s := range testSpans(3, false) {
		b.OnEnd(s)
	}
	for _, s := range testSpans(4, true) {
		b.OnEnd(s)
	}
	select {
	case <-exp.exported:
	case <-time.After(10 * time.Second):
		t.Fatal("a full batch was not exported before the schedule delay")
	}
	if got := exp.sizes(); len(got) != 1 || got[0] != 4 {
		t.Fatalf("batches %v, want [4]", got)
	}
	// A wake-up for a full batch sends whole batches only: three spans wait for more.
	for _, s := range testSpans(3, true) {
		b.OnEnd(s)
	}
	_ = b.exportQueued(context.Background(), true)
	if got := exp.sizes(); len(got) != 1 {
		t.Fatalf("batches %v: a part batch was sent on a full batch's wake-up", got)
	}
	// While an export is under way (the lock an export holds), the queue fills: it holds
	// 10, so 7 of these 12 join the 3 waiting and 5 are dropped.
	b.exportMu.Lock()
	for _, s := range testSpans(12, true) {
		b.OnEnd(s)
	}
	b.exportMu.Unlock()
	// The loop may be exporting full batches meanwhile; Shutdown exports what is left.
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range exp.sizes() {
		if n > 4 {
			t.Errorf("a batch of %d spans exceeds OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4", n)
		}
		total += n
	}
	if total != 14 || !exp.shut {
		t.Errorf("exported %d spans (want 4 + 3 + 7 queued), exporter shut down %v", total, exp.shut)
	}
	b.OnEnd(testSpans(1, true)[0]) // after shutdown: dropped, no panic
	if err := b.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// batchConfig keeps the SDK's defaults and never makes a batch larger than the queue.
func TestBatchConfig(t *testing.T) {
	cases := []struct {
		env                map[string]string
		delay, timeout     time.Duration
		maxQueue, maxBatch int
	}{
		{map[string]string{}, 5 * time.Second, 30 * time.Second, 2048, 512},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_BSP_EXPORT_TIMEOUT": "1000"}, 200 * time.Millisecond, time.Second, 2048, 512},
		{map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100"}, 5 * time.Second, 30 * time.Second, 100, 100},
		{map[string]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "-3", "OTEL_BSP_SCHEDULE_DELAY": "soon"}, 5 * time.Second, 30 * time.Second, 2048, 512},
	}
	for _, tc := range cases {
		d, to, q, bs := batchConfig(func(k string) string { return tc.env[k] })
		if d != tc.delay || to != tc.timeout || q != tc.maxQueue || bs != tc.maxBatch {
			t.Errorf("%v: got %v %v %d %d, want %v %v %d %d", tc.env, d, to, q, bs, tc.delay, tc.timeout, tc.maxQueue, tc.maxBatch)
		}
	}
}

package tracing

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the SDK's batch span processor with the same OTEL_BSP_* settings, minus its
// per-span hand-off: the SDK's sends every ended span over a channel to its export
// goroutine, which wakes, appends it and parks again, twice per traced request; under
// load those goroutine switches cost about as much as building the spans. Here an ended
// span is appended to a queue under a lock, and the export goroutine wakes only when a
// batch is full or the schedule delay is up. Spans are exported outside the request path,
// a full queue drops spans rather than wait, and a failed batch is reported and dropped.
type batcher struct {
	exp      sdktrace.SpanExporter
	delay    time.Duration // OTEL_BSP_SCHEDULE_DELAY
	timeout  time.Duration // OTEL_BSP_EXPORT_TIMEOUT
	maxQueue int           // OTEL_BSP_MAX_QUEUE_SIZE
	maxBatch int           // OTEL_BSP_MAX_EXPORT_BATCH_SIZE

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	dropped int
	stopped bool

	kick     chan struct{} // a full batch is waiting
	done     chan struct{} // closed by Shutdown
	loopDone chan struct{}
	stopOnce sync.Once

	exportMu sync.Mutex // one export at a time; guards batch
	batch    []sdktrace.ReadOnlySpan
}

// batchConfig reads the OTEL_BSP_* variables as the SDK does: milliseconds and counts, a
// value that is not a positive integer leaving the default, and no batch larger than the
// queue.
func batchConfig(getenv func(string) string) (delay, timeout time.Duration, maxQueue, maxBatch int) {
	num := func(name string, def int) int {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			otel.Handle(fmt.Errorf("%s=%q is not a positive integer; using %d", name, v, def))
			return def
		}
		return n
	}
	delay = time.Duration(num("OTEL_BSP_SCHEDULE_DELAY", 5000)) * time.Millisecond
	timeout = time.Duration(num("OTEL_BSP_EXPORT_TIMEOUT", 30000)) * time.Millisecond
	maxQueue = num("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
	maxBatch = min(num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512), maxQueue)
	return delay, timeout, maxQueue, maxBatch
}

func newBatcher(exp sdktrace.SpanExporter, getenv func(string) string) *batcher {
	b := &batcher{exp: exp, kick: make(chan struct{}, 1), done: make(chan struct{}), loopDone: make(chan struct{})}
	b.delay, b.timeout, b.maxQueue, b.maxBatch = batchConfig(getenv)
	go b.loop()
	return b
}

func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span. It runs on the request path: a lock and an append.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped || len(b.queue) >= b.maxQueue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) == b.maxBatch
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default: // already woken
		}
	}
}

func (b *batcher) loop() {
	defer close(b.loopDone)
	t := time.NewTimer(b.delay)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-b.kick:
			// Whole batches only: what arrives meanwhile waits for its batch to fill or for
			// the delay, or a steady load would be sent in small batches back to back.
			_ = b.exportQueued(context.Background(), true)
		case <-t.C:
			_ = b.exportQueued(context.Background(), false)
			t.Reset(b.delay)
		}
	}
}

// exportQueued exports the queue in batches of at most maxBatch, and returns the first error.
// wholeOnly exports full batches while there are any; otherwise it exports the spans queued
// when it was called, all of them, unless ctx ends first.
func (b *batcher) exportQueued(ctx context.Context, wholeOnly bool) error {
	b.exportMu.Lock()
	defer b.exportMu.Unlock()
	var first error
	b.mu.Lock()
	left := len(b.queue)
	b.mu.Unlock()
	for ctx.Err() == nil {
		b.mu.Lock()
		n := min(len(b.queue), b.maxBatch)
		if wholeOnly && n < b.maxBatch {
			n = 0
		} else if !wholeOnly {
			n = min(n, left)
			left -= n
		}
		b.batch = append(b.batch[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		dropped := b.dropped
		b.dropped = 0
		b.mu.Unlock()
		if dropped > 0 {
			otel.Handle(fmt.Errorf("traces: %d spans dropped: the export queue (OTEL_BSP_MAX_QUEUE_SIZE=%d) was full", dropped, b.maxQueue))
		}
		if n == 0 {
			break
		}
		ectx, cancel := context.WithTimeout(ctx, b.timeout)
		err := b.exp.ExportSpans(ectx, b.batch)
		cancel()
		clear(b.batch) // hold no span once it is exported
		if err != nil {
			otel.Handle(err)
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// ForceFlush exports everything queued now.
func (b *batcher) ForceFlush(ctx context.Context) error {
	return b.exportQueued(ctx, false)
}

// Shutdown stops queueing, exports what is queued and shuts the exporter down; once.
func (b *batcher) Shutdown(ctx context.Context) error {
	var err error
	b.stopOnce.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.done)
		select {
		case <-b.loopDone: // an export under way ends first
		case <-ctx.Done():
		}
		err = b.exportQueued(ctx, false)
		if e := b.exp.Shutdown(ctx); err == nil {
			err = e
		}
	})
	return err
}

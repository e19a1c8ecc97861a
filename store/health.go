package store

import (
	"strings"
	"sync"
)

// Writer names a feature that writes to the record store behind its callers' backs (in
// batches, on a timer, or by retrying), so that a failed write has no caller to tell. They
// are the values of the store label of modelgate_store_write_failures_total: a fixed set.
type Writer string

const (
	WriterResponses Writer = "responses" // stored responses (stored.Keeper)
	WriterLedger    Writer = "ledger"    // spend totals (billing.Ledger)
	WriterUsage     Writer = "usage"     // the usage history (billing.Recorder)
)

// nWriters is how many Writers there are.
const nWriters = 3

// Writers is every Writer, in the order metrics and /readyz list them.
func Writers() [nWriters]Writer { return [nWriters]Writer{WriterResponses, WriterLedger, WriterUsage} }

// WriteHealth counts the record store's failed background writes per writer and knows which
// writers are failing now (their last write failed), for the failure counter and for
// /readyz's degraded state. Without it a full disk or a Redis that refuses writes showed
// only as an error log line: requests kept succeeding and the readiness probe stayed green
// while what they wrote was lost. One per process, shared by the writers; a nil
// *WriteHealth ignores what it is told.
type WriteHealth struct {
	mu       sync.Mutex
	failures [nWriters]uint64
	failing  [nWriters]bool
}

func writerIndex(w Writer) int {
	for i, x := range Writers() {
		if x == w {
			return i
		}
	}
	return -1
}

// Wrote records the outcome of one write (a batch counts once) by w: a failure is counted
// and marks w failing until one of its writes succeeds.
func (h *WriteHealth) Wrote(w Writer, err error) {
	i := writerIndex(w)
	if h == nil || i < 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing[i] = err != nil
	if err != nil {
		h.failures[i]++
	}
}

// Failures calls fn with each writer's count of failed writes, every writer included.
func (h *WriteHealth) Failures(fn func(w Writer, n uint64)) {
	if h == nil {
		return
	}
	h.mu.Lock()
	counts := h.failures
	h.mu.Unlock()
	for i, w := range Writers() {
		fn(w, counts[i])
	}
}

// Degraded says why the store is degraded ("" when it is not): which writers' last writes
// failed. It names writers only, never an error's text, since /readyz answers anyone.
func (h *WriteHealth) Degraded() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	failing := h.failing
	h.mu.Unlock()
	var names []string
	for i, w := range Writers() {
		if failing[i] {
			names = append(names, string(w))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "the record store cannot write: " + strings.Join(names, ", ")
}

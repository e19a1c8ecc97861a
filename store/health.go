package store

import (
	"strings"
	"sync/atomic"
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
//
// Atomics rather than a lock: a shared store's responses tell it of every write.
type WriteHealth struct {
	failures [nWriters]atomic.Uint64
	failing  [nWriters]atomic.Bool
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
	if err != nil {
		h.failures[i].Add(1)
	}
	if h.failing[i].Load() != (err != nil) { // no write to the shared line when unchanged
		h.failing[i].Store(err != nil)
	}
}

// Failures calls fn with each writer's count of failed writes, every writer included.
func (h *WriteHealth) Failures(fn func(w Writer, n uint64)) {
	if h == nil {
		return
	}
	for i, w := range Writers() {
		fn(w, h.failures[i].Load())
	}
}

// Degraded says why the store is degraded ("" when it is not): which writers' last writes
// failed. It names writers only, never an error's text, since /readyz answers anyone.
func (h *WriteHealth) Degraded() string {
	if h == nil {
		return ""
	}
	var names []string
	for i, w := range Writers() {
		if h.failing[i].Load() {
			names = append(names, string(w))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "the record store cannot write: " + strings.Join(names, ", ")
}

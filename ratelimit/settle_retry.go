package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Settlements that fail are retried for settleRetryFor, well inside the two minutes the
// settle script's idempotency marker (a field of the settlement minute's hash) lives, so a
// retry of a settlement that did run finds the marker. At most maxPendingSettles wait; an
// outage long enough to fill the queue loses the oldest usage rather than memory.
const (
	settleRetryFor    = 50 * time.Second
	maxPendingSettles = 100_000
	firstSettleRetry  = 50 * time.Millisecond
	maxSettleRetry    = time.Second
)

// pendingSettle is one settlement, kept as it was first tried so a retry sends the same
// script with the same id and clock.
type pendingSettle struct {
	now   time.Time
	t     *Ticket
	u     Usage
	id    string
	first time.Time // wall clock of the first failure: the retry horizon counts from it
}

type settleQueue struct {
	mu      sync.Mutex
	items   []*pendingSettle
	dropped int
	wake    chan struct{}
	done    chan struct{}
}

func (q *settleQueue) add(p *pendingSettle) {
	q.mu.Lock()
	if len(q.items) >= maxPendingSettles {
		q.items = q.items[1:]
		q.dropped++
	}
	q.items = append(q.items, p)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *settleQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// retrySettles runs while the store is open: woken by a failed settlement, it retries the
// queue with a growing pause until the queue is empty.
func (r *redisStore) retrySettles() {
	defer close(r.retry.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.retry.wake:
		}
		for delay := firstSettleRetry; ; delay = min(2*delay, maxSettleRetry) {
			t := time.NewTimer(delay)
			select {
			case <-r.stop:
				t.Stop()
				return
			case <-t.C:
			}
			if r.drainSettles() {
				break
			}
		}
	}
}

// drainSettles retries waiting settlements in order until one fails (the store is still
// away) and reports whether none is left.
func (r *redisStore) drainSettles() bool {
	q := &r.retry
	q.mu.Lock()
	items := q.items
	q.items = nil
	q.mu.Unlock()
	done, expired := 0, 0
	var failed []*pendingSettle
	for i, p := range items {
		if time.Since(p.first) > settleRetryFor {
			expired++
			continue
		}
		if err := r.runSettle(context.Background(), p); err != nil {
			failed = items[i:]
			break
		}
		done++
	}
	q.mu.Lock()
	q.items = append(failed, q.items...)
	dropped := q.dropped + expired
	q.dropped = 0
	left := len(q.items)
	q.mu.Unlock()
	if done > 0 {
		r.log.Info("rate limit settlements applied after a store outage", "count", done)
	}
	if dropped > 0 {
		r.log.Warn("rate limit settlements dropped: the store stayed unreachable", "count", dropped)
	}
	return left == 0
}

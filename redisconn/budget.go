package redisconn

import (
	"context"
	"sync/atomic"
	"time"
)

// RequestBudget is how long one request may wait in all on a store that does not answer:
// one store timeout, the limiter's (ratelimit's StoreTimeout default).
const RequestBudget = 500 * time.Millisecond

// budget is one request's store budget: what is left of it, in nanoseconds. Only commands
// that got no answer spend it; a store that answers, however slowly, is not an outage.
type budget struct{ ns atomic.Int64 }

func (b *budget) left() time.Duration { return time.Duration(b.ns.Load()) }

func (b *budget) spend(d time.Duration) { b.ns.Add(-int64(d)) }

type budgetKey struct{}

// WithBudget gives ctx a store budget of d for every command made with it (or a context
// derived from it), limiter and record store alike: each command is bounded by what is left,
// a command that times out or cannot connect spends the time it waited, and once it is spent
// the request's commands fail at once with ErrUnavailable. A budget ctx already had is
// replaced: a request served inside another (a WebSocket turn inside its connection's
// upgrade) has a budget of its own.
func WithBudget(ctx context.Context, d time.Duration) context.Context {
	b := &budget{}
	b.ns.Store(int64(d))
	return context.WithValue(ctx, budgetKey{}, b)
}

// KeepBudget returns dst carrying src's budget, if src has one: for work done for a request
// after its context ends (a settle made on context.Background()), which must not wait on the
// store again once the request has spent its budget.
func KeepBudget(dst, src context.Context) context.Context {
	if b := budgetOf(src); b != nil && budgetOf(dst) == nil {
		return context.WithValue(dst, budgetKey{}, b)
	}
	return dst
}

func budgetOf(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

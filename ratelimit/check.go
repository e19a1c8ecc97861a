package ratelimit

import (
	"context"
	"time"
)

// Check answers whether req would be refused now, charging nothing and taking no slot. It
// is the cheap look a caller takes before it does expensive work for a request (reading and
// inflating its body): a key out of requests, concurrency or daily tokens is refused without
// that work. Admit still decides: Check allowing a request promises nothing, and two
// requests checked at once may both be allowed here and one refused by Admit.
//
// req.Tokens is the least the request will reserve (1 for a model call, whose body is not
// read yet; 0 for a call that uses no tokens), so a minute or day budget with less than that
// left refuses. Shadow requests are never refused here; Admit records what enforcement
// would have done. A store failure is allowed or refused as on_store_error says.
func (l *Limiter) Check(ctx context.Context, req Request) (Decision, error) {
	now := l.now()
	a, views, err := l.look(ctx, now, req, req.Tokens)
	if err != nil {
		if ctx.Err() == nil {
			l.storeFailed("check", err)
		}
		if l.failOpen {
			return Decision{Allowed: true, StoreError: true}, err
		}
		return Decision{Reason: ReasonStoreUnavailable, StoreError: true, RetryAfter: time.Second}, err
	}
	d := Decision{Allowed: true, Headers: headersFor(now, a, views)}
	if req.Shadow {
		return d, nil
	}
	var fails []failure
	midnight := untilMidnight(now)
	for i := 0; i < a.n; i++ {
		fails = checkScope(fails, i, a.scopes[i].Limits, views[i], a.tokens, midnight)
	}
	if len(fails) > 0 {
		worst, retry := verdict(fails)
		d.Allowed, d.Reason, d.Scope, d.RetryAfter = false, worst.reason, a.scopes[worst.scope].ID, retry
	}
	return d, nil
}

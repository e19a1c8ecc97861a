// Package upstream makes modelgate's calls to the platform's model gateway: it picks a
// platform key from the team's pool, sends the call, retries it where the platform cannot have
// started the work, traces each attempt, and says how a call that got no usable answer
// failed. It is the one place a call picks a key, retries and falls back: a Chain
// (chain.go) walks the asked model's fallbacks, watches a stream for its first output event
// (firsttoken.go) and asks the breakers, so every route falls back alike.
package upstream

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"modelgate/platform"
)

// Policy is modelgate's one rule for trying an upstream call again.
//
// A generation is not idempotent: a second attempt after the platform may have started one
// can bill twice. So an attempt is repeated only when the platform certainly did not start the
// work, or said so itself:
//   - the connection could not be made (dial error): always, since no request left;
//   - the platform answered 429, 502, 503 or 504: it refused the work. Its Retry-After or
//     retry-after-ms is honoured when the wait fits the remaining deadline; a longer wait is
//     not waited for, and the answer goes to the client at once, whose SDK can decide.
//
// Nothing is retried after a byte went to the client: handlers only call the upstream before
// they write anything, so this is true by construction. Timeouts after the request was sent,
// resets and 500s are not retried.
type Policy struct {
	MaxRetries int
	Base       time.Duration // first backoff; doubles each attempt
	MaxBackoff time.Duration
	Jitter     func() float64 // in [0,1); tests pin it
	// Sleep waits between attempts; nil means a real timer. Tests replace it to see the
	// waits the policy chose without spending them.
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultPolicy is the policy of a config that allows maxRetries retries.
func DefaultPolicy(maxRetries int) Policy {
	return Policy{MaxRetries: maxRetries, Base: 100 * time.Millisecond, MaxBackoff: 2 * time.Second, Jitter: rand.Float64}
}

// Decide returns how long to wait before attempt number done+1, or false to stop.
// remaining is the time left before the call's deadline.
func (p Policy) Decide(done int, resp *http.Response, err error, remaining time.Duration) (time.Duration, bool) {
	if done > p.MaxRetries {
		return 0, false
	}
	switch {
	case err != nil:
		if !platform.IsDialError(err) {
			return 0, false
		}
	case resp != nil:
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		default:
			return 0, false
		}
		if wait, ok := RetryAfter(resp.Header); ok {
			if wait > remaining {
				return 0, false
			}
			return wait, true
		}
	default:
		return 0, false
	}
	wait := p.backoff(done)
	if wait > remaining {
		return 0, false
	}
	return wait, true
}

// backoff is exponential with "equal jitter": half fixed, half random, so retries from many
// clients spread out but never collapse to zero.
func (p Policy) backoff(done int) time.Duration {
	d := p.Base << (done - 1)
	if d > p.MaxBackoff || d <= 0 {
		d = p.MaxBackoff
	}
	half := d / 2
	return half + time.Duration(p.Jitter()*float64(half))
}

// sleep waits d between attempts, by the policy's Sleep when a test set one.
func (p Policy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return sleepCtx(ctx, d)
}

// RetryAfter reads retry-after-ms (milliseconds, OpenAI's) first, then Retry-After (seconds or
// an HTTP date). Unparsable values are ignored so backoff applies.
func RetryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e6 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		// An instant from the platform's clock: read against the real time, not the
		// injected one (docs/architecture.md, "Time").
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// sleepCtx waits for d or until ctx ends, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

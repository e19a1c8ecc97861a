package proxy

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"modelgate/platform"
)

// retryPolicy is modelgate's one rule for trying an upstream call again.
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
type retryPolicy struct {
	maxRetries int
	base       time.Duration // first backoff; doubles each attempt
	maxBackoff time.Duration
	jitter     func() float64 // in [0,1); replaced in tests
	// sleep waits between attempts; nil means a real timer. Tests replace it to see the
	// waits the policy chose without spending them.
	sleep func(ctx context.Context, d time.Duration) error
}

func defaultRetryPolicy(maxRetries int) retryPolicy {
	return retryPolicy{maxRetries: maxRetries, base: 100 * time.Millisecond, maxBackoff: 2 * time.Second, jitter: rand.Float64}
}

// decide returns how long to wait before attempt number done+1, or false to stop.
// remaining is the time left before the call's deadline.
func (p retryPolicy) decide(done int, resp *http.Response, err error, remaining time.Duration) (time.Duration, bool) {
	if done > p.maxRetries {
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
		if wait, ok := retryAfter(resp.Header); ok {
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
func (p retryPolicy) backoff(done int) time.Duration {
	d := p.base << (done - 1)
	if d > p.maxBackoff || d <= 0 {
		d = p.maxBackoff
	}
	half := d / 2
	return half + time.Duration(p.jitter()*float64(half))
}

// retryAfter reads retry-after-ms (milliseconds, OpenAI's) first, then Retry-After (seconds or
// an HTTP date). Unparsable values are ignored so backoff applies.
func retryAfter(h http.Header) (time.Duration, bool) {
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

// attempt sends one upstream call built by build with a key from keys, retrying by policy.
// It returns the final response (any status) or the final transport error. The context
// bounds the waits too.
//
// With a pool of platform keys, a 401/403 or 429 on one key is retried at once on another
// usable key, without counting against max_retries: that key's refusal says nothing about
// the request. Retries the policy allows go to a key not tried yet when there is one.
func (s *Server) attempt(ctx context.Context, st *state, ri *requestInfo, deadline time.Time, keys keySource, build func(ctx context.Context, key string) (*http.Request, error)) (*http.Response, error) {
	policy := st.retry
	var tried []*poolKey
	var next *poolKey
	judged := 0 // attempts the retry policy has judged
	for done := 1; ; done++ {
		key, k := keys.plain, next
		if keys.pool != nil && k == nil {
			var ok bool
			if k, ok = keys.next(tried); !ok && len(tried) > 0 {
				// No untried key is usable: any key may go again, the best first.
				tried = tried[:0]
				k, _ = keys.next(tried)
			}
		}
		next = nil
		if k != nil {
			key = k.secret
		}
		actx, span := ctx, trace.Span(nil)
		if ri.trace != nil {
			actx, span = s.startAttempt(ctx, ri)
		}
		req, err := build(actx, key)
		if err != nil {
			if span != nil {
				s.endAttempt(span, nil, done, nil, err)
			}
			if k != nil {
				k.release()
			}
			return nil, err
		}
		if span != nil {
			s.sendAttempt(actx, req)
		}
		ri.attempts = done
		if k != nil {
			k.inflight.Add(1)
		}
		resp, err := s.platform.Do(req)
		if k != nil {
			if resp != nil {
				resp.Body = &inflightBody{ReadCloser: resp.Body, k: k}
			} else {
				k.inflight.Add(-1)
			}
			if !contains(tried, k) {
				tried = append(tried, k)
			}
			if v := keys.pool.observe(k, resp, err); v != keyFine && ctx.Err() == nil {
				if n, ok := keys.next(tried); ok {
					if span != nil {
						s.endAttempt(span, req, done, resp, err)
					}
					discard(resp)
					next = n
					continue
				}
			}
		}
		judged++
		wait, again := policy.decide(judged, resp, err, time.Until(deadline))
		if !again || ctx.Err() != nil {
			if span != nil {
				s.finalAttempt(span, req, done, resp, err)
			}
			return resp, err
		}
		if span != nil {
			s.endAttempt(span, req, done, resp, err)
		}
		discard(resp)
		sleep := policy.sleep
		if sleep == nil {
			sleep = sleepCtx
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
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

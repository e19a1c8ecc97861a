package upstream

import (
	"context"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"modelgate/auth"
)

// keys is where an upstream call's platform key comes from.
type keys struct {
	pool  *Pool    // shared keys: the team's pool
	pin   *poolKey // one key of pool only (an asset is read with the key that uploaded it)
	plain string   // the caller's own platform key
}

// keysFor is the key source of a principal's calls.
func (g *Gateway) keysFor(p *auth.Principal) keys {
	pool := g.pools[p.Team]
	if p.Runtime {
		pool = g.runtime
	}
	if pool != nil && len(pool.keys) > 0 && g.shared {
		return keys{pool: pool}
	}
	return keys{plain: p.PlatformKey.Reveal()}
}

// next picks the key for the next attempt among those not yet tried, and says whether the
// key can be used now (not cooling, not out). nil: nothing left to try.
func (ks keys) next(tried []*poolKey) (*poolKey, bool) {
	if ks.pin != nil {
		if contains(tried, ks.pin) {
			return nil, false
		}
		ok, probe := ks.pin.usable(ks.pool.now())
		if probe {
			ks.pin.mu.Lock()
			ks.pin.probing = true
			ks.pin.mu.Unlock()
		}
		return ks.pin, ok
	}
	return ks.pool.pick(tried)
}

// attempt sends one upstream call built by build with a key from ks, retrying by policy.
// It returns the final response (any status) or the final transport error. The context
// bounds the waits too.
//
// With a pool of platform keys, a 401/403 or 429 on one key is retried at once on another
// usable key, without counting against max_retries: that key's refusal says nothing about
// the request. Retries the policy allows go to a key not tried yet when there is one;
// retries bounds them (the policy's MaxRetries, or a model's own count, see Call.Retries).
func (g *Gateway) attempt(ctx context.Context, tr *Trail, deadline time.Time, ks keys, retries int, build func(ctx context.Context, key string) (*http.Request, error)) (*http.Response, error) {
	policy := g.policy
	policy.MaxRetries = retries
	var tried []*poolKey
	var next *poolKey
	judged := 0 // attempts the retry policy has judged
	for done := 1; ; done++ {
		key, k := ks.plain, next
		if ks.pool != nil && k == nil {
			var ok bool
			if k, ok = ks.next(tried); !ok && len(tried) > 0 {
				// No untried key is usable: any key may go again, the best first.
				tried = tried[:0]
				k, _ = ks.next(tried)
			}
		}
		next = nil
		if k != nil {
			key = k.secret
		}
		actx, span := ctx, trace.Span(nil)
		if tr.Span != nil {
			actx, span = g.startAttempt(ctx, tr.Span)
		}
		req, err := build(actx, key)
		if err != nil {
			if span != nil {
				g.endAttempt(span, nil, done, nil, err)
			}
			if k != nil {
				k.release()
			}
			return nil, err
		}
		if span != nil {
			g.sendAttempt(actx, req)
		}
		if tr.Attempts != nil {
			*tr.Attempts = done
		}
		if k != nil {
			k.inflight.Add(1)
		}
		resp, err := g.platform.Do(req)
		if k != nil {
			if resp != nil {
				resp.Body = &inflightBody{ReadCloser: resp.Body, k: k}
			} else {
				k.inflight.Add(-1)
			}
			if !contains(tried, k) {
				tried = append(tried, k)
			}
			v := ks.pool.observe(k, resp, err)
			ks.pool.report(k, resp, v)
			if v != keyFine && ctx.Err() == nil {
				if n, ok := ks.next(tried); ok {
					if span != nil {
						g.endAttempt(span, req, done, resp, err)
					}
					discard(resp)
					next = n
					continue
				}
			}
		}
		judged++
		wait, again := policy.Decide(judged, resp, err, time.Until(deadline))
		if !again || ctx.Err() != nil {
			if span != nil {
				g.finalAttempt(span, req, done, resp, err)
			}
			return resp, err
		}
		if span != nil {
			g.endAttempt(span, req, done, resp, err)
		}
		discard(resp)
		if err := policy.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// discard lets go of an answer that will not be relayed, draining a little of it so the
// connection can be reused.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

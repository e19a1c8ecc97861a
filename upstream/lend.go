package upstream

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptrace"
	"time"

	"modelgate/auth"
)

// Lender lends one caller's platform keys to calls the gateway does not build itself (the
// sidecar's REST routes): the team's pool with shared keys, the caller's own key otherwise.
// The pool's state (calls in flight, keys cooling or out) stays inside this package.
type Lender struct {
	g  *Gateway
	p  *auth.Principal
	tr Trail
}

// Lender returns p's lender; its calls report to tr.
func (g *Gateway) Lender(p *auth.Principal, tr Trail) *Lender {
	return &Lender{g: g, p: p, tr: tr}
}

// Send sends one call built by build with the key it is handed, retrying and moving to
// another key as the policy allows, within ctx's deadline (the request timeout when it has
// none). prefer, when not "", is the fingerprint of the key to ask with while the team still
// holds it.
func (l *Lender) Send(ctx context.Context, prefer string, build func(ctx context.Context, key string) (*http.Request, error)) (*http.Response, error) {
	ks := l.g.keysFor(l.p)
	if prefer != "" && ks.pool != nil {
		ks.pin = ks.pool.byFingerprint(prefer)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(l.g.timeout)
	}
	return l.g.attempt(l.timed(ctx), &l.tr, deadline, ks, l.g.policy.MaxRetries, build)
}

// Lease lends one key for a call that cannot be sent twice (a streamed upload). The returned
// context is the one to send with.
func (l *Lender) Lease(ctx context.Context) (context.Context, *Lease) {
	if l.tr.Attempts != nil {
		*l.tr.Attempts = 1
	}
	ks := l.g.keysFor(l.p)
	lease := &Lease{secret: ks.plain, pool: ks.pool}
	if ks.pool != nil {
		lease.key, _ = ks.next(nil)
		lease.secret = lease.key.secret
		lease.key.inflight.Add(1)
	}
	return l.timed(ctx), lease
}

// Quoted reports whether b contains the caller's platform key or any key of its team's
// pool: with failover the answer may come from any of them.
func (l *Lender) Quoted(b []byte) bool {
	if key := l.p.PlatformKey.Reveal(); key != "" && bytes.Contains(b, []byte(key)) {
		return true
	}
	if ks := l.g.keysFor(l.p); ks.pool != nil {
		for _, k := range ks.pool.keys {
			if k.secret != "" && bytes.Contains(b, []byte(k.secret)) {
				return true
			}
		}
	}
	return false
}

// Caller is the caller's own platform key, for per-key caches (never kept as it is).
func (l *Lender) Caller() string { return l.p.PlatformKey.Reveal() }

// timed makes the calls under ctx add their wait to the trail's; otherwise it is ctx.
func (l *Lender) timed(ctx context.Context) context.Context {
	if l.tr.Wait == nil {
		return ctx
	}
	return httptrace.WithClientTrace(ctx, l.g.timeWait(&httptrace.ClientTrace{}, l.tr.Wait))
}

// Lease is one key lent for a call that goes once: a pool key counted in flight until Done,
// whose answer updates the key's state; or the caller's own key.
type Lease struct {
	secret string
	pool   *Pool
	key    *poolKey // nil: the caller's own key
}

// Key is the platform key to send with.
func (l *Lease) Key() string { return l.secret }

// Fingerprint names the key in owner records; "" for a caller's own key.
func (l *Lease) Fingerprint() string {
	if l.key == nil {
		return ""
	}
	return l.key.fingerprint
}

// Done reports the call's outcome (its answer or transport error) to the key's state and its
// breaker, as a gateway call does, and ends the lease.
func (l *Lease) Done(resp *http.Response, err error) {
	if l.key != nil {
		l.key.inflight.Add(-1)
		l.pool.report(l.key, resp, l.pool.observe(l.key, resp, err))
	}
}

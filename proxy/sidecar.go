package proxy

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/platform"
	"modelgate/ratelimit"
	"modelgate/sidecar"
)

// sidecarRoutes registers the platform REST routes (package sidecar) behind modelgate's own
// gate: draining, authentication and admission, each answered in the platform's envelope.
func (s *Server) sidecarRoutes(e *gin.Engine, owners sidecar.Owners) {
	routes := sidecar.New(sidecar.Deps{Platform: s.platform, Owners: owners, Log: s.log, Now: s.now})
	routes.Register(e.Group("/api/open/v2", s.sidecarDraining, s.sidecarAuthenticate, s.sidecarAdmit))
}

// sidecarOwners is where asset owners are kept: the shared record store, or this process's
// memory for a server built without one.
func (s *Server) sidecarOwners() sidecar.Owners {
	if s.records == nil {
		return sidecar.MemoryOwners(s.now)
	}
	return sidecar.StoreOwners(s.records)
}

func (s *Server) sidecarDraining(c *gin.Context) {
	info(c).route = c.FullPath()
	if s.draining.Load() {
		c.Header("Connection", "close")
		abortEnvelope(c, http.StatusServiceUnavailable, platform.CodeSystem, "modelgate is shutting down; retry on another instance")
	}
}

// sidecarAuthenticate is the /v1 authentication with the platform's answer to a bad key:
// HTTP 401, envelope code 2. Nothing is read from the body and nothing goes upstream before
// it passed.
func (s *Server) sidecarAuthenticate(c *gin.Context) {
	st := s.state()
	p, err := st.auth.Authenticate(c.GetHeader("Authorization"))
	if err != nil {
		msg := "invalid API key"
		if errors.Is(err, auth.ErrMissing) {
			msg = "missing API key: send it in the Authorization header as 'Bearer <key>'"
		}
		abortEnvelope(c, http.StatusUnauthorized, platform.CodeNotLoggedIn, msg)
		return
	}
	if st.auth.Mode() == auth.ModePassthrough {
		s.limitPassthrough(p, st.cfg.Ratelimit)
	}
	ri := info(c)
	ri.team, ri.keyName = p.Team, p.KeyName
	c.Set(principalKey, p)
	c.Set(stateKey, st)
}

// sidecarAdmit counts the call against the request and concurrency limits (sidecar calls
// use no model tokens, so none are reserved and none are charged), hands the routes their
// Call, and copies what they report into the request's record.
func (s *Server) sidecarAdmit(c *gin.Context) {
	p, st, ri := principal(c), requestState(c), info(c)
	ticket := s.admit(c, p, ratelimit.Usage{}, false)
	if ticket == nil {
		return
	}
	defer ticket.Settle(ratelimit.Usage{})
	call := &sidecar.Call{
		RequestID: ri.requestID, Route: ri.route, Team: p.Team,
		Shared: st.auth.Mode() != auth.ModePassthrough,
		Keys:   &sidecarKeys{s: s, st: st, p: p, ri: ri},
		Settings: sidecar.Settings{
			RequestTimeout:    st.cfg.Upstream.RequestTimeout,
			BalanceCacheTTL:   st.cfg.Sidecar.BalanceCacheTTL,
			MaxUploadBytes:    st.cfg.Server.MaxUploadBytes,
			UploadIdleTimeout: st.cfg.Server.UploadIdleTimeout,
		},
	}
	sidecar.WithCall(c, call)
	c.Next()
	if call.ErrCode != "" {
		ri.errCode = call.ErrCode
	}
	if call.UpstreamErr != "" {
		ri.upstreamErr = call.UpstreamErr
	}
	ri.clientGone = ri.clientGone || call.ClientGone
}

// sidecarKeys lends one caller's platform keys to the sidecar routes: the team's pool in
// keys mode, the caller's own key in passthrough. The pool's state (in-flight counts, keys
// cooling or out) stays here.
type sidecarKeys struct {
	s  *Server
	st *state
	p  *auth.Principal
	ri *requestInfo
}

func (k *sidecarKeys) Send(ctx context.Context, prefer string, build func(ctx context.Context, key string) (*http.Request, error)) (*http.Response, error) {
	keys := keysFor(k.st, k.p)
	if prefer != "" && keys.pool != nil {
		keys.pin = keys.pool.byFingerprint(prefer)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(k.st.cfg.Upstream.RequestTimeout)
	}
	return k.s.attempt(traceUpstreamWait(ctx, k.ri), k.st, k.ri, deadline, keys, build)
}

func (k *sidecarKeys) Lease(ctx context.Context) (context.Context, sidecar.Lease) {
	k.ri.attempts = 1
	keys := keysFor(k.st, k.p)
	l := &keyLease{secret: keys.plain, pool: keys.pool}
	if keys.pool != nil {
		l.key, _ = keys.next(nil)
		l.secret = l.key.secret
		l.key.inflight.Add(1)
	}
	return traceUpstreamWait(ctx, k.ri), l
}

// Quoted reports whether b contains the caller's platform key or any key of its team's
// pool: with failover the answer may come from any of them.
func (k *sidecarKeys) Quoted(b []byte) bool {
	if key := k.p.PlatformKey.Reveal(); key != "" && bytes.Contains(b, []byte(key)) {
		return true
	}
	if ks := keysFor(k.st, k.p); ks.pool != nil {
		for _, pk := range ks.pool.keys {
			if pk.secret != "" && bytes.Contains(b, []byte(pk.secret)) {
				return true
			}
		}
	}
	return false
}

func (k *sidecarKeys) Caller() string { return k.p.PlatformKey.Reveal() }

// keyLease is one key lent for a call that goes once: a pool key counted in flight until
// Done, whose answer updates the key's state; or the caller's own key.
type keyLease struct {
	secret string
	pool   *keyPool
	key    *poolKey // nil: the caller's own key
}

func (l *keyLease) Key() string { return l.secret }

func (l *keyLease) Fingerprint() string {
	if l.key == nil {
		return ""
	}
	return l.key.fingerprint
}

func (l *keyLease) Done(resp *http.Response, err error) {
	if l.key != nil {
		l.key.inflight.Add(-1)
		l.pool.observe(l.key, resp, err)
	}
}

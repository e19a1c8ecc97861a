package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/reqlog"
)

// Key pool timings. A 429 without Retry-After cools a key for defaultCoolDown; a rejected key
// is tried again after OutBackoff, doubling per failed probe up to maxOutBackoff, so a key
// revoked for good costs one request every few minutes and a key restored at the platform
// comes back on its own.
const (
	defaultCoolDown = 10 * time.Second
	maxCoolDown     = 10 * time.Minute
	// OutBackoff is how long a key the platform rejected stays out before one request
	// probes it again.
	OutBackoff    = 30 * time.Second
	maxOutBackoff = 10 * time.Minute
)

// poolKey is one platform key and what the pool knows about it.
type poolKey struct {
	secret      string
	fingerprint string // short and safe to show: the first 8 hex digits of sha256(key)
	breaker     string // KeyBreaker(fingerprint), made once
	inflight    atomic.Int64

	mu      sync.Mutex
	state   string
	until   time.Time     // cooling: end of the cool-down; out: when a probe may go
	backoff time.Duration // out: the wait before the next probe
	probing bool          // out: one request is testing the key now
}

// Fingerprint names a platform key in logs, metrics and owner records without revealing it.
func Fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// Pool spreads one team's calls over its platform keys and takes keys the platform refuses
// out of the rotation. It lives as long as one loaded config (one Gateway): a reload starts
// every key healthy again.
type Pool struct {
	team string
	keys []*poolKey
	now  func() time.Time
	log  func(msg string, args ...any) // nil: silent
	// intn picks among equally loaded keys; replaced in tests.
	intn func(n int) int
	// health holds the keys' circuit breakers (KeyBreaker); nil: none. A key whose breaker
	// is open is passed over like a cooling key; the pool's own states stay this process's
	// quick reaction to one answer, the breaker the shared one to repeated answers.
	health Health
}

func newPool(team string, secrets []string, now func() time.Time) *Pool {
	p := &Pool{team: team, now: now, intn: rand.IntN}
	for _, s := range secrets {
		fp := Fingerprint(s)
		p.keys = append(p.keys, &poolKey{secret: s, fingerprint: fp, breaker: KeyBreaker(fp), state: reqlog.KeyHealthy})
	}
	return p
}

// usable reports whether k may take a request now, and whether that request is a probe of a
// key that was out. A cooling key whose time is up is healthy again.
func (k *poolKey) usable(now time.Time) (ok, probe bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch k.state {
	case reqlog.KeyCooling:
		if now.Before(k.until) {
			return false, false
		}
		k.state = reqlog.KeyHealthy
	case reqlog.KeyOut:
		if k.probing || now.Before(k.until) {
			return false, false
		}
		return true, true
	}
	return true, false
}

// pick chooses the key for the next attempt among those not in tried: the healthy key with
// the fewest calls in flight, ties at random. When every untried key is cooling or out, the
// one that recovers soonest is returned all the same, so the platform's own answer (a 429 or
// 401) reaches the client rather than one modelgate made up; ok is false then. nil means
// every key was tried.
func (p *Pool) pick(tried []*poolKey) (*poolKey, bool) {
	var blocked []*poolKey
	for {
		k, ok := p.pickAmong(tried, blocked)
		if !ok || p.health == nil || p.health.Allow(k.breaker) {
			if k == nil && len(blocked) > 0 {
				// Every other key is spent: the platform's answer beats one made up here.
				return blocked[0], false
			}
			return k, ok
		}
		k.release()
		blocked = append(blocked, k)
	}
}

// report tells k's breaker what the platform said about k: a 401/403 or 429 counts against
// it, any other answer for it. A transport error says nothing about a key.
func (p *Pool) report(k *poolKey, resp *http.Response, v keyVerdict) {
	if p.health == nil || resp == nil {
		return
	}
	p.health.Report(k.breaker, v != keyFine)
}

// pickAmong is pick's choice among the keys in neither tried nor blocked.
func (p *Pool) pickAmong(tried, blocked []*poolKey) (k *poolKey, ok bool) {
	now := p.now()
	var best []*poolKey
	var bestLoad int64
	var fallback *poolKey
	var fallbackAt time.Time
	for _, k := range p.keys {
		if contains(tried, k) || contains(blocked, k) {
			continue
		}
		ok, _ := k.usable(now)
		if !ok {
			at := k.recovery()
			if fallback == nil || at.Before(fallbackAt) {
				fallback, fallbackAt = k, at
			}
			continue
		}
		load := k.inflight.Load()
		switch {
		case len(best) == 0 || load < bestLoad:
			best, bestLoad = append(best[:0], k), load
		case load == bestLoad:
			best = append(best, k)
		}
	}
	if len(best) == 0 {
		return fallback, false
	}
	k = best[0]
	if len(best) > 1 {
		k = best[p.intn(len(best))]
	}
	k.mu.Lock()
	if k.state == reqlog.KeyOut {
		k.probing = true
	}
	k.mu.Unlock()
	return k, true
}

// recovery is when k may be used again, for ordering keys that cannot be used now.
func (k *poolKey) recovery() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	// An out key recovers only after a probe: rank it behind every cooling key.
	if k.state == reqlog.KeyOut {
		return k.until.Add(maxCoolDown)
	}
	return k.until
}

func contains(keys []*poolKey, k *poolKey) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// keyVerdict is what an answer says about the key it was sent with.
type keyVerdict int

const (
	keyFine     keyVerdict = iota // the key works (whatever else went wrong)
	keyRejected                   // 401/403: the platform refuses the key
	keyLimited                    // 429: the key is rate-limited
)

// observe updates k from one attempt's answer and says what it showed about the key.
// Transport errors say nothing about the key; a probe that ends that way may probe again.
func (p *Pool) observe(k *poolKey, resp *http.Response, err error) keyVerdict {
	k.mu.Lock()
	defer k.mu.Unlock()
	wasProbe := k.probing
	k.probing = false
	if err != nil || resp == nil {
		return keyFine
	}
	now := p.now()
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		k.backoff = nextBackoff(k.backoff, wasProbe && k.state == reqlog.KeyOut)
		k.state, k.until = reqlog.KeyOut, now.Add(k.backoff)
		p.say("platform key taken out of service", "team", p.team, "key_fingerprint", k.fingerprint,
			"status", resp.StatusCode, "probe_in", k.backoff.String())
		return keyRejected
	case http.StatusTooManyRequests:
		wait, ok := RetryAfter(resp.Header)
		if !ok || wait <= 0 {
			wait = defaultCoolDown
		}
		wait = min(wait, maxCoolDown)
		if k.state != reqlog.KeyOut {
			k.state = reqlog.KeyCooling
		}
		if end := now.Add(wait); end.After(k.until) || k.state == reqlog.KeyCooling {
			k.until = end
		}
		return keyLimited
	}
	if k.state == reqlog.KeyOut {
		p.say("platform key back in service", "team", p.team, "key_fingerprint", k.fingerprint)
	}
	k.state, k.backoff = reqlog.KeyHealthy, 0
	return keyFine
}

// nextBackoff doubles the wait after a failed probe and starts it afresh otherwise.
func nextBackoff(cur time.Duration, failedProbe bool) time.Duration {
	if !failedProbe || cur <= 0 {
		return OutBackoff
	}
	return min(2*cur, maxOutBackoff)
}

// BreakTiesWith sets how pick chooses among equally loaded keys: intn(n) names one of n.
// Tests pin it to make a run repeatable; nil restores the random choice. Set it while no call
// is being made.
func (p *Pool) BreakTiesWith(intn func(n int) int) {
	if intn == nil {
		intn = rand.IntN
	}
	p.intn = intn
}

func (p *Pool) say(msg string, args ...any) {
	if p.log != nil {
		p.log(msg, args...)
	}
}

// release ends a usable pick that sent nothing: the request could not be built, or the
// caller chose not to use it.
func (k *poolKey) release() {
	k.mu.Lock()
	k.probing = false
	k.mu.Unlock()
}

// byFingerprint returns the key with fingerprint fp, if the pool holds it.
func (p *Pool) byFingerprint(fp string) *poolKey {
	for _, k := range p.keys {
		if k.fingerprint == fp {
			return k
		}
	}
	return nil
}

// States reports each key of the pool by fingerprint, with its state and calls in flight.
func (p *Pool) States() []reqlog.KeyState {
	now := p.now()
	out := make([]reqlog.KeyState, 0, len(p.keys))
	for _, k := range p.keys {
		k.mu.Lock()
		st := k.state
		if st == reqlog.KeyCooling && !now.Before(k.until) {
			st = reqlog.KeyHealthy
		}
		k.mu.Unlock()
		out = append(out, reqlog.KeyState{Team: p.team, Fingerprint: k.fingerprint, State: st, InFlight: k.inflight.Load()})
	}
	return out
}

// HasUsable reports whether any key is not out of service. Cooling keys count: they recover
// by themselves within their Retry-After.
func (p *Pool) HasUsable() bool {
	for _, k := range p.keys {
		k.mu.Lock()
		st := k.state
		k.mu.Unlock()
		if st != reqlog.KeyOut {
			return true
		}
	}
	return false
}

// inflightBody keeps a key counted as in flight until the answer's body is closed, so a
// long stream weighs on its key for as long as it runs.
type inflightBody struct {
	io.ReadCloser
	k    *poolKey
	once sync.Once
}

func (b *inflightBody) Close() error {
	b.once.Do(func() { b.k.inflight.Add(-1) })
	return b.ReadCloser.Close()
}

package proxy

import (
	"io"
	"net/http"
	"sort"

	"modelgate/auth"
	"modelgate/reqlog"
)

// keySource is where an upstream call's platform key comes from.
type keySource struct {
	pool  *keyPool // keys mode: the team's pool
	pin   *poolKey // one key of pool only (an asset is read with the key that uploaded it)
	plain string   // passthrough: the caller's own token
}

// next picks the key for the next attempt among those not yet tried, and says whether the
// key can be used now (not cooling, not out). nil: nothing left to try.
func (ks keySource) next(tried []*poolKey) (*poolKey, bool) {
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

// keysFor is the key source of a principal's calls.
func keysFor(st *state, p *auth.Principal) keySource {
	if pool := st.pools[p.Team]; pool != nil && len(pool.keys) > 0 && st.auth.Mode() == auth.ModeKeys {
		return keySource{pool: pool}
	}
	return keySource{plain: p.PlatformKey.Reveal()}
}

// withPools gives every team of st its pool of platform keys. Pools belong to one loaded
// config, so a reload puts every key back in service.
func (s *Server) withPools(st *state) *state {
	st.pools = make(map[string]*keyPool, len(st.cfg.Teams))
	for i := range st.cfg.Teams {
		t := &st.cfg.Teams[i]
		pool := newKeyPool(t.Name, st.cfg.TeamPlatformKeys(t), s.now)
		pool.log = func(msg string, args ...any) { s.log.Warn(msg, args...) }
		st.pools[t.Name] = pool
	}
	return st
}

// KeyStates reports every team's platform keys by fingerprint, sorted by team, for metrics.
func (s *Server) KeyStates() []reqlog.KeyState {
	st := s.state()
	var out []reqlog.KeyState
	for _, pool := range st.pools {
		out = append(out, pool.states()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Team < out[j].Team })
	return out
}

// teamWithoutKeys names a team none of whose platform keys is in service, or "".
func (st *state) teamWithoutKeys() string {
	if st.auth.Mode() != auth.ModeKeys {
		return ""
	}
	for _, t := range st.cfg.Teams {
		if pool := st.pools[t.Name]; pool != nil && len(t.Keys) > 0 && !pool.hasUsable() {
			return t.Name
		}
	}
	return ""
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

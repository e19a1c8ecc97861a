package proxy

import (
	"math/rand/v2"
	"net/http"
	"unsafe"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/routing"
	"modelgate/translate"
	"modelgate/upstream"
)

// Weighted routes (issue 27): a model with models[].routes has its platform model chosen once
// per request, in the preflight's prepare step, before the upstream body is built: every
// route (chat, Messages, Responses, a background response, count_tokens' estimate) goes
// through state.routeCall. Prices, limits and calibration stay keyed by the client-facing id.

// newRouteTable is the routing table of a model's validated routes, each with its breaker's
// name worked out once, so a choice builds no string.
func newRouteTable(routes []config.Route) *routing.Table {
	rs := make([]routing.Route, len(routes))
	for i, r := range routes {
		rs[i] = routing.Route{Upstream: r.Upstream, Breaker: upstream.ModelBreaker(r.Upstream), Weight: uint64(r.Weight)}
	}
	return routing.New(rs)
}

// stickyKey is what keeps a request on its route (routing.Sticky).
type stickyKey = routing.Sticky

// stickyOf is the sticky choice of a client-facing id: "" when it has no routes or draws
// afresh for every call, so a request whose model is not sticky reads nothing more of its
// body.
func (t modelTable) stickyOf(id string) string {
	if e, ok := t.entries[id]; ok && e.routes != nil {
		return e.sticky
	}
	return ""
}

// routeCall sets the platform model of the call: the id's upstream, or the choice of its
// routes. A sticky model places the request by key, or by the caller's key (its limit scope,
// never the secret) when the request names no user or conversation; other routed models draw
// at random by weight. Routes whose model breaker is open are skipped while another is
// healthy (st.health; nil: all healthy).
func (st *state) routeCall(call *modelCall, p *auth.Principal, key stickyKey) {
	st.models.route(call, p, key, st.health)
}

// route is routeCall with the breakers named: h nil takes every route as healthy.
func (t modelTable) route(call *modelCall, p *auth.Principal, key stickyKey, h upstream.Health) {
	e, ok := t.entries[call.model]
	switch {
	case !ok:
		call.upstream = call.model
		return
	case e.routes == nil:
		call.upstream = e.upstream
		return
	}
	var i int
	if e.sticky == "" {
		i = e.routes.Draw(rand.Uint64(), h)
	} else {
		if !key.OK {
			key = stickyKey{Hash: routing.Key(p.ScopeID), OK: true}
		}
		i = e.routes.Stick(key.Hash, h)
	}
	call.upstream, call.routed = e.routes.Route(i).Upstream, true
}

// view is b as a string without a copy, for gjson to read: nothing writes a request body
// or a platform answer in place, so what is read from it stays valid while b lives.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// identityKey is the sticky key of a request to model from what its parse read (Chat and
// Messages): user: the end user, else the safety identifier; conversation: the prompt cache
// key, else the mark of the first user message. A model that is not sticky reads nothing.
func (t modelTable) identityKey(model string, id *translate.Identity) stickyKey {
	switch t.stickyOf(model) {
	case config.StickyUser:
		return routing.First(routing.StringKey(id.User), routing.StringKey(id.SafetyIdentifier))
	case config.StickyConversation:
		return routing.First(routing.StringKey(id.PromptCacheKey), stickyKey{Hash: id.FirstUser, OK: id.FirstUser != 0})
	}
	return stickyKey{}
}

// The headers a session is named in (routing.SessionKey), which a WebSocket turn carries too.
const (
	headerSessionAffinity = routing.HeaderSessionAffinity
	headerSessionID       = routing.HeaderSessionID
	headerSessionIDPlain  = routing.HeaderSessionIDPlain
)

// maxSessionKey bounds the part of a session id that is hashed: like an end user's id, a
// longer one is placed by its first bytes (translate.MaxIdentityLen), so a large header
// costs no more than a short one.
const maxSessionKey = translate.MaxIdentityLen

// withSession is key with the request's session applied for a sticky model: on sticky:
// conversation the session comes first (it names the conversation as the client sees it);
// on sticky: user a named end user still comes first, then the session, then (routeCall)
// the caller's key. A model that is not sticky reads no header.
func (t modelTable) withSession(model string, key stickyKey, h http.Header, metadata string) stickyKey {
	switch t.stickyOf(model) {
	case config.StickyConversation:
		return routing.First(routing.SessionKey(h, metadata, maxSessionKey), key)
	case config.StickyUser:
		if key.OK {
			return key
		}
		return routing.SessionKey(h, metadata, maxSessionKey)
	}
	return key
}

// responsesStickyKey is a Responses request's sticky value, from the fields its check's scan read.
// user: `user`, else `safety_identifier`. conversation: `prompt_cache_key`, else the
// `conversation` id; a request with neither is placed by its first user input item once a
// stored conversation is expanded (firstInputKey).
func responsesStickyKey(f *translate.ResponsesFields, kind string) stickyKey {
	if kind == config.StickyUser {
		return routing.First(routing.StringKey(f.User), routing.StringKey(f.Safety))
	}
	convo := f.Convo
	if convo.IsObject() {
		convo = convo.Get("id")
	}
	return routing.First(routing.StringKey(f.CacheKey), routing.KeyOf(convo))
}

// countedUpstream is the platform model count_tokens estimates for: the same choice a call
// would make (by the request's sticky key), without asking the breakers (nothing is sent, so
// no probe may be spent).
func countedUpstream(st *state, p *auth.Principal, model string, key stickyKey) string {
	call := modelCall{model: model}
	st.models.route(&call, p, key, nil)
	return call.upstream
}

package proxy

import (
	"math/rand/v2"
	"unsafe"

	"github.com/tidwall/gjson"

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

// stickyKey is what keeps a request on its route: the hash (routing.Key) of its end user or
// conversation, when it names one.
type stickyKey struct {
	hash uint64
	ok   bool
}

// keyOf hashes a sticky value: a non-empty string, or the raw JSON of anything else that is
// present (a conversation's first message).
func keyOf(v gjson.Result) stickyKey {
	switch {
	case v.Type == gjson.String && v.Str != "":
		return stickyKey{routing.Key(v.Str), true}
	case v.Type == gjson.JSON && v.Raw != "":
		return stickyKey{routing.Key(v.Raw), true}
	}
	return stickyKey{}
}

// first returns the first of keys that is set.
func first(keys ...stickyKey) stickyKey {
	for _, k := range keys {
		if k.ok {
			return k
		}
	}
	return stickyKey{}
}

// stickyRead reads the sticky key of a request to a sticky model without keeping a large
// body reachable across its parse: a body still reachable there is held twice at its peak,
// which a hostile body of tens of megabytes turns into hundreds (TestCrashInputsRefused).
// A body up to maxPeek is kept and read once the parse accepted it (the parse bounds its
// nesting, so gjson's recursion is safe on it); a larger one is read before the parse, and
// only when the bounded validator accepts it. A config without sticky models reads nothing.
type stickyRead struct {
	small []byte    // a body kept to read after the parse
	key   stickyKey // the key read before the parse
	read  func([]byte, string) stickyKey
}

// beforeParse starts a stickyRead of body with the dialect's key reader.
//
//go:noinline
func beforeParse(st *state, body []byte, read func([]byte, string) stickyKey) stickyRead {
	switch {
	case !st.models.anySticky:
		return stickyRead{}
	case len(body) <= maxPeek:
		return stickyRead{small: body, read: read}
	case translate.CheckJSON(body) != translate.JSONValid:
		return stickyRead{}
	}
	if kind := st.models.stickyOf(gjson.Get(view(body), "model").Str); kind != "" {
		return stickyRead{key: read(body, kind)}
	}
	return stickyRead{}
}

// after is the key of a request to model, once its body was parsed.
func (r stickyRead) after(st *state, model string) stickyKey {
	if r.small == nil {
		return r.key
	}
	if kind := st.models.stickyOf(model); kind != "" {
		return r.read(r.small, kind)
	}
	return stickyKey{}
}

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
		if !key.ok {
			key = stickyKey{routing.Key(p.ScopeID), true}
		}
		i = e.routes.Stick(key.hash, h)
	}
	call.upstream, call.routed = e.routes.Route(i).Upstream, true
}

// view is b as a string without a copy, for gjson to read: nothing writes a request body
// or a platform answer in place, so what is read from it stays valid while b lives.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// chatStickyKey is a Chat Completions request's sticky value. user: the `user` field, else
// `safety_identifier`. conversation: `prompt_cache_key`, else the first user message, which
// every turn of a chat resends unchanged (a system prompt is shared by all conversations of
// an application, so it is no key). One pass over the top level finds them all. Out of line,
// so its fields take no room in the check's frame, under which the parse runs.
//
//go:noinline
func chatStickyKey(body []byte, kind string) stickyKey {
	f := readStickyFields(body)
	if kind == config.StickyUser {
		return first(keyOf(f.user), keyOf(f.safety))
	}
	if k := keyOf(f.cacheKey); k.ok {
		return k
	}
	return keyOf(firstUserItem(f.messages))
}

// stickyFields are the top-level fields a Chat Completions or Responses request's sticky
// value may come from.
type stickyFields struct{ user, safety, cacheKey, convo, messages gjson.Result }

// readStickyFields finds them in one pass over the top level.
func readStickyFields(body []byte) (f stickyFields) {
	gjson.Parse(view(body)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "user":
			f.user = v
		case "safety_identifier":
			f.safety = v
		case "prompt_cache_key":
			f.cacheKey = v
		case "conversation":
			f.convo = v
		case "messages":
			f.messages = v
		}
		return true
	})
	return f
}

// firstUserItem is the first element of a list of messages or input items whose role is
// user, or nothing.
func firstUserItem(list gjson.Result) gjson.Result {
	var found gjson.Result
	list.ForEach(func(_, item gjson.Result) bool {
		if item.Get("role").Str == "user" {
			found = item
			return false
		}
		return true
	})
	return found
}

// messagesStickyKey is an Anthropic Messages request's sticky value. user:
// `metadata.user_id`. conversation: the first user message (Messages has no conversation id;
// every turn resends the history from it). Out of line, like chatStickyKey.
//
//go:noinline
func messagesStickyKey(body []byte, kind string) stickyKey {
	if kind == config.StickyUser {
		return keyOf(gjson.Get(view(body), "metadata.user_id"))
	}
	return keyOf(firstUserItem(gjson.Get(view(body), "messages")))
}

// responsesStickyKey is a Responses request's sticky value. user: `user`, else
// `safety_identifier`. conversation: `prompt_cache_key` (the Codex CLI sets it to its
// session), else the `conversation` id; a request with neither is placed by its first user
// input item once a stored conversation is expanded (firstInputKey).
//
// It reads the body again rather than widening the check's table of fields: that table sits
// in the frame the parse runs under, whose stack is kept small (TestOpenStreamStack), and
// only a sticky model pays for this pass.
//
//go:noinline
func responsesStickyKey(body []byte, kind string) stickyKey {
	f := readStickyFields(body)
	if kind == config.StickyUser {
		return first(keyOf(f.user), keyOf(f.safety))
	}
	convo := f.convo
	if convo.IsObject() {
		convo = convo.Get("id")
	}
	return first(keyOf(f.cacheKey), keyOf(convo))
}

// firstInputKey is the sticky value of a Responses conversation without an id: its first
// user input item (or its input, when that is a string). With previous_response_id kept by
// modelgate the expanded input starts with the conversation's first turn, so every turn
// lands on the same route.
//
//go:noinline
func firstInputKey(body []byte) stickyKey {
	in := gjson.Get(view(body), "input")
	if in.IsArray() {
		return keyOf(firstUserItem(in))
	}
	return keyOf(in)
}

// countedUpstream is the platform model count_tokens estimates for: the same choice a call
// would make (by the request's sticky key), without asking the breakers (nothing is sent, so
// no probe may be spent).
func countedUpstream(st *state, p *auth.Principal, model string, key stickyKey) string {
	call := modelCall{model: model}
	st.models.route(&call, p, key, nil)
	return call.upstream
}

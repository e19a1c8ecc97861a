package auth

import (
	"container/list"
	"sync"
	"time"

	"modelgate/config"
)

// In passthrough mode every distinct caller token is its own limit scope. Callers choose their
// tokens, so the number of scopes (and of counters in memory, bbolt or Redis) is bounded
// here: up to a cap, each caller keeps a scope of its own; past it, new callers share one
// overflow scope with the same limits, so rotating tokens buys no fresh budget once the cap
// is reached. The optional ratelimit.passthrough_limits then bound all callers together.
const (
	defaultPassthroughCallers = 10000
	overflowScopeID           = "caller:overflow"
	// PassthroughAllScopeID is the scope of ratelimit.passthrough_limits, which all
	// passthrough callers share.
	PassthroughAllScopeID = "passthrough:all"
	// callerIdleEvict: a caller unseen for longer than this (its minute and UTC day windows
	// long gone) gives its place up to a new caller when the table is full.
	callerIdleEvict = 26 * time.Hour
)

// Callers is the table of passthrough callers with a scope of their own, least recently
// seen last. It outlives config reloads, like the limiter's counters it bounds.
type Callers struct {
	mu   sync.Mutex
	ll   *list.List // of *callerSeen, most recent first
	byID map[string]*list.Element
}

type callerSeen struct {
	id   string
	seen time.Time
}

// NewCallers is an empty table.
func NewCallers() *Callers {
	return &Callers{ll: list.New(), byID: map[string]*list.Element{}}
}

// scope returns the scope id for a caller whose own scope would be id: id itself while the
// caller has or can get a place among the max most recent, the overflow scope otherwise.
func (cs *Callers) scope(id string, now time.Time, max int) string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if e, ok := cs.byID[id]; ok {
		e.Value.(*callerSeen).seen = now
		cs.ll.MoveToFront(e)
		return id
	}
	for cs.ll.Len() >= max {
		// Full (or the cap was lowered by a reload): only callers long idle give way.
		last := cs.ll.Back()
		if last == nil || now.Sub(last.Value.(*callerSeen).seen) < callerIdleEvict {
			return overflowScopeID
		}
		delete(cs.byID, last.Value.(*callerSeen).id)
		cs.ll.Remove(last)
	}
	cs.byID[id] = cs.ll.PushFront(&callerSeen{id: id, seen: now})
	return id
}

// Limit applies the caller cap and the shared passthrough limits to a passthrough caller's
// principal (a fresh value per request), seen at now.
func (cs *Callers) Limit(p *Principal, rl config.Ratelimit, now time.Time) {
	max := int(rl.PassthroughCallers)
	if max <= 0 {
		max = defaultPassthroughCallers
	}
	p.ScopeID = cs.scope(p.ScopeID, now, max)
	if rl.PassthroughLimits != (config.Limits{}) {
		p.TeamScopeID, p.TeamLimits = PassthroughAllScopeID, rl.PassthroughLimits
	}
}

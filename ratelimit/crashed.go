package ratelimit

import (
	"context"
	"errors"
)

// TicketState is what settling a ticket needs, kept outside the process (the admission
// journal) so that the next life of a replica killed while the ticket was open can settle it:
// with Redis by the same ticket id and lease, which frees the slot at once and counts the
// settle once however often it is sent.
type TicketState struct {
	ID      string       `json:"id"`
	Lease   string       `json:"lease,omitempty"`
	Scopes  []ScopeState `json:"scopes"`
	Tokens  int64        `json:"tokens"`
	Input   int64        `json:"input"`
	Day     int64        `json:"day"`
	Charged bool         `json:"charged,omitempty"`
	Counted bool         `json:"counted,omitempty"`
	Unsure  bool         `json:"unsure,omitempty"`
}

// ScopeState is one scope of a TicketState: its id and the one limit a settle reads.
type ScopeState struct {
	ID              string `json:"id"`
	TokensPerMinute int64  `json:"tpm,omitempty"`
}

// State is t's TicketState; the zero state for a nil ticket.
func (t *Ticket) State() TicketState {
	if t == nil || t.a == nil {
		return TicketState{}
	}
	a := t.a
	st := TicketState{ID: a.id, Lease: a.lease, Scopes: make([]ScopeState, a.n), Tokens: a.tokens,
		Input: t.reserve.InputTokens, Day: t.day, Charged: t.charged, Counted: t.counted, Unsure: t.unsure}
	for i := 0; i < a.n; i++ {
		st.Scopes[i] = ScopeState{ID: a.scopes[i].ID, TokensPerMinute: a.scopes[i].Limits.TokensPerMinute}
	}
	return st
}

// ErrBadState is SettleCrashed's answer to a state that names no scope or too many.
var ErrBadState = errors.New("ratelimit: ticket state names no scope or too many")

// SettleCrashed settles, at its reservation, a ticket a previous life of this replica
// admitted and never settled (it was killed), and returns the usage charged. The
// reservation is the documented upper bound of what the platform may have billed; the
// concurrency slot is freed at once. On Redis the settle is the ticket's own, so one that
// did land before the kill is not counted again. The memory store's day counters were
// written at most a second before the kill and may lack the admission's reservation, so
// what a scope has charged today is raised to at least what it used.
func (l *Limiter) SettleCrashed(ctx context.Context, st TicketState) (Usage, error) {
	if len(st.Scopes) == 0 || len(st.Scopes) > maxScopes {
		return Usage{}, ErrBadState
	}
	a := &admission{n: len(st.Scopes), tokens: max(st.Tokens, 0), id: st.ID, lease: st.Lease}
	for i, sc := range st.Scopes {
		a.scopes[i] = Scope{ID: sc.ID}
		a.scopes[i].Limits.TokensPerMinute = sc.TokensPerMinute
	}
	u := reservation(Request{Tokens: st.Tokens, Input: st.Input})
	t := &Ticket{l: l, a: a, charged: st.Charged, counted: st.Counted, unsure: st.Unsure,
		day: st.Day, reserve: u, crashed: true}
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return Usage{}, errors.New("ratelimit: closed")
	}
	t.done.Store(true)
	if !t.charged && !t.counted && !t.unsure {
		return u, nil
	}
	return u, l.store.settle(ctx, l.now(), t, u)
}

// Flush writes the memory store's day counters now, so what SettleCrashed charged outlives
// another kill; Redis writes as it goes.
func (l *Limiter) Flush() error {
	if m, ok := l.store.(*memoryStore); ok && m.db != nil {
		return m.flush()
	}
	return nil
}

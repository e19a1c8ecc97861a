package proxy

import (
	"context"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/stored"
	"modelgate/storedapi"
)

// storeTimeout bounds one request's calls to the record store (storedapi.StoreTimeout).
const storeTimeout = storedapi.StoreTimeout

// newKeeper builds the server's stored-responses keeper over its record store
// (stored.Open); nil without one.
func (s *Server) newKeeper(cfg *config.Config) (*stored.Keeper, error) {
	if s.records == nil {
		return nil, nil
	}
	return stored.Open(s.records, stored.Options{TTL: cfg.Responses.StoreTTL, MaxPerOwner: cfg.Responses.StoreMaxPerTeam,
		Now: s.now, Health: s.writes, HoldBytes: s.holdBytes, RetryEvery: s.holdRetry}, s.log)
}

// withKeeper gives a state the keeper when its config keeps responses, with its limits.
func (s *Server) withKeeper(st *state) *state {
	r := st.cfg.Responses
	if s.keeper != nil && r.StoreLocal() {
		s.keeper.SetLimits(r.StoreTTL, r.StoreMaxPerTeam)
		st.keeper = s.keeper
	}
	return st
}

// Close waits until kept responses still being written are in the store. Call it before
// closing the store.
func (s *Server) Close() {
	// Background responses still running are cancelled and record their end (failed) first.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.bg.Drain(ctx)
	if s.keeper != nil {
		s.keeper.Close(s.log)
	}
}

// owner is whose records a caller sees: its team, or under responses.scope: key the key
// itself; in passthrough the caller itself (one platform key's conversations are its own).
// Records live under their owner, so another owner's id is not found at all: "not yours"
// and "unknown" cannot answer differently.
func owner(st *state, p *auth.Principal) string {
	if p.TeamScopeID != "" && !st.cfg.Responses.KeyScoped() {
		return p.TeamScopeID
	}
	return p.ScopeID
}

// storedTurn is what a request brings to the record kept of its answer.
type storedTurn struct {
	owner  string
	parent string // previous_response_id, "" for a first turn
	model  string // client-facing
	input  []byte // this turn's own items
}

// expandPrevious replaces a previous_response_id by the conversation it names
// (storedapi.Service.Expand), under the caller's owner. It returns the body to send and the
// turn to keep (nil under store: false). A refusal has answered the client; nothing went
// upstream.
//
//go:noinline
func (s *Server) expandPrevious(c *gin.Context, st *state, p *auth.Principal, body []byte, t storedapi.Ask) ([]byte, *storedTurn, bool) {
	if !t.Keep && !t.Continued {
		return body, nil, true // nothing to add and nothing to keep: forwarded as it came
	}
	who := owner(st, p)
	body, input, ok := s.kept.Expand(c, st.keeper, who, body, t, st.cfg.Server.MaxBodyBytes)
	if !ok || !t.Keep {
		return body, nil, ok
	}
	return body, &storedTurn{owner: who, parent: t.Prev, model: t.Model, input: input}, true
}

// keepTurn keeps the response the platform gave to turn (storedapi.Service.Keep).
func (s *Server) keepTurn(c *gin.Context, st *state, turn *storedTurn, response []byte) {
	s.kept.Keep(c, st.keeper, turn.owner, stored.Turn{Parent: turn.parent, Model: turn.model, Input: turn.input}, response)
}

// storedService is the routes over kept responses and the expansion of stored
// conversations (storedapi), over this server's state and background jobs.
func (s *Server) storedService() *storedapi.Service {
	return &storedapi.Service{
		Lookup: func(c *gin.Context) (*stored.Keeper, string) {
			st := requestState(c)
			if st.keeper == nil {
				return nil, ""
			}
			return st.keeper, owner(st, principal(c))
		},
		CheckOrphan: s.bg.CheckOrphan,
		Stop:        s.bg.Stop,
		CancelJob:   s.bg.Cancel,
		Log:         s.log,
	}
}

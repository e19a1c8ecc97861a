package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/store"
	"modelgate/stored"
	"modelgate/translate"
)

// storeTimeout bounds one request's calls to the record store, so a stalled Redis costs a
// request seconds, not the client's whole patience.
const storeTimeout = 5 * time.Second

// newKeeper builds the server's stored-responses keeper over its record store. The
// embedded store belongs to this process alone, so records are written behind the answer,
// in batches (one sync to disk for many); a shared one (Redis) gets each record before the
// answer goes out, so a replica asked for the next turn finds it.
func (s *Server) newKeeper(cfg *config.Config) (*stored.Keeper, error) {
	if s.records == nil {
		return nil, nil
	}
	_, embedded := s.records.(*store.Bolt)
	k := stored.NewKeeper(s.records, stored.Options{
		TTL: cfg.Responses.StoreTTL, MaxPerOwner: cfg.Responses.StoreMaxPerTeam, Now: s.now,
		WriteBehind: embedded, Health: s.writes, HoldBytes: s.holdBytes, RetryEvery: s.holdRetry,
		OnError: func(err error) {
			if errors.Is(err, stored.ErrExists) {
				// The platform repeated an id: the first response keeps it.
				s.log.Warn("stored responses: response not kept", slog.String("error", err.Error()))
				return
			}
			s.log.Error("stored responses: background write failed", slog.String("error", err.Error()))
		},
	})
	// The embedded store's records are found through an index in memory, read back here.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.Load(ctx); err != nil {
		return nil, fmt.Errorf("stored responses: reading the record store: %w", err)
	}
	return k, nil
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
		s.keeper.Stop() // one last try at what is queued or held
		if n, bytes := s.keeper.Held(); n > 0 {
			s.log.Error("stored responses: records the store refused are lost with the process",
				slog.Int("records", n), slog.Int64("bytes", bytes))
		}
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

// turnAsk is what a Responses request asks of stored responses, read from its fields by
// askedTurn: whether to keep its answer, the response it continues, and its own input.
type turnAsk struct {
	keep      bool
	continued bool   // previous_response_id was given ("" included: it names no response)
	prev      string // previous_response_id
	inputRaw  string // the request's own input, raw JSON
	model     string // client-facing
}

// askedTurn reads what the request asks of stored responses, refusing a store or
// previous_response_id of the wrong type (then it has answered the client). It keeps plain
// values only: the parsed fields stay in the check's frame.
func askedTurn(c *gin.Context, f *translate.ResponsesFields) (turnAsk, bool) {
	t := turnAsk{keep: true, inputRaw: f.Input.Raw, model: f.Model.Str}
	switch {
	case !f.Store.Exists() || f.Store.Type == gjson.Null:
	case f.Store.IsBool():
		t.keep = f.Store.Bool()
	default:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "store", "Invalid type for 'store': expected a boolean.")
		return t, false
	}
	switch {
	case !f.Previous.Exists() || f.Previous.Type == gjson.Null:
	case f.Previous.Type == gjson.String:
		t.prev, t.continued = f.Previous.Str, true
	default:
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "previous_response_id", "Invalid type for 'previous_response_id': expected a string.")
		return t, false
	}
	return t, true
}

// expandPrevious replaces a previous_response_id by the conversation it names: the earlier
// turns' items, oldest first, then the new input. It returns the body to send and the turn
// to keep (nil under store: false). A refusal has answered the client; nothing went upstream.
//
//go:noinline
func (s *Server) expandPrevious(c *gin.Context, st *state, p *auth.Principal, body []byte, t turnAsk) ([]byte, *storedTurn, bool) {
	keep, prev, continued := t.keep, t.prev, t.continued
	if !keep && !continued {
		return body, nil, true // nothing to add and nothing to keep: forwarded as it came
	}
	if keep && st.keeper.Full() {
		// The store refuses writes and the memory that holds its records meanwhile is
		// full: this answer's id could not be kept, so the call is refused before it
		// costs anything.
		s.storeFull(c, st.keeper.RetryEvery())
		return nil, nil, false
	}
	turnInput, err := stored.TurnInput(t.inputRaw)
	if err != nil {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_type", "input", "Invalid type for 'input': expected a string or an array.")
		return nil, nil, false
	}
	who := owner(st, p)
	if continued {
		ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
		// The expanded body is held in memory and sent whole: it is bounded like a body.
		chain, err := st.keeper.Chain(ctx, who, prev, st.cfg.Server.MaxBodyBytes)
		cancel()
		switch {
		case errors.Is(err, stored.ErrTooLarge):
			abortError(c, http.StatusBadRequest, typeInvalidRequest, "context_length_exceeded", "previous_response_id",
				"The conversation of response '"+apierr.SanitizePath(prev)+"' is larger than "+formatBytes(st.cfg.Server.MaxBodyBytes)+" and cannot be sent whole; start a new one.")
			return nil, nil, false
		case errors.Is(err, stored.ErrNotFound), errors.Is(err, stored.ErrBrokenChain):
			msg := "Previous response with id '" + apierr.SanitizePath(prev) + "' not found."
			if errors.Is(err, stored.ErrBrokenChain) {
				msg = "Previous response with id '" + apierr.SanitizePath(prev) + "' cannot be continued: an earlier response of its conversation has expired or was deleted."
			}
			abortError(c, http.StatusBadRequest, typeInvalidRequest, "previous_response_not_found", "previous_response_id", msg)
			return nil, nil, false
		case err != nil:
			s.storeUnavailable(c, err)
			return nil, nil, false
		case stored.Unfinished(chain[len(chain)-1].Status) && s.stillRunning(c, st, who, chain[len(chain)-1]):
			abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_request", "previous_response_id",
				"Previous response with id '"+apierr.SanitizePath(prev)+"' is not finished yet; wait until it is completed.")
			return nil, nil, false
		}
		body, err = sjson.SetRawBytes(body, "input", stored.ExpandedInput(chain, turnInput))
		if err == nil {
			body, err = deleteAll(body, "previous_response_id")
		}
		if err != nil {
			abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_json", "", "The request body could not be prepared.")
			return nil, nil, false
		}
	}
	if !keep {
		return body, nil, true
	}
	return body, &storedTurn{owner: who, parent: prev, model: t.model, input: turnInput}, true
}

// stillRunning reports whether an unfinished background response is still being run (one
// whose runner is gone is marked failed here, and can be continued).
func (s *Server) stillRunning(c *gin.Context, st *state, who string, r *stored.Record) bool {
	ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
	defer cancel()
	return stored.Unfinished(s.checkOrphan(ctx, st, who, r).Status)
}

// deleteAll removes every top-level occurrence of key (a duplicated key included).
func deleteAll(body []byte, key string) ([]byte, error) {
	var err error
	for gjson.GetBytes(body, key).Exists() {
		if body, err = sjson.DeleteBytes(body, key); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// keepTurn keeps the response the platform gave to turn. A failure is logged, never the
// client's problem: the answer itself is good.
func (s *Server) keepTurn(c *gin.Context, st *state, turn *storedTurn, response []byte) {
	ri := info(c)
	// The client may leave once the answer is out; the record is still worth keeping. (The
	// keeper bounds its own store calls.)
	ctx := context.WithoutCancel(c.Request.Context())
	err := st.keeper.KeepResponse(ctx, turn.owner, stored.Turn{Parent: turn.parent, Model: turn.model, Input: turn.input}, response)
	if err != nil {
		level := slog.LevelError
		if errors.Is(err, stored.ErrExists) {
			level = slog.LevelWarn // the platform repeated an id: the first response keeps it
		}
		s.log.LogAttrs(context.Background(), level, "response not kept",
			slog.String("request_id", ri.RequestID), slog.String("team", ri.Team), slog.String("error", err.Error()))
	}
}

// storeFull refuses a call whose response could not be kept: 503 with Retry-After, in the
// route's shape.
func (s *Server) storeFull(c *gin.Context, retry time.Duration) {
	info(c).UpstreamErr = "store"
	c.Header("Retry-After", strconv.Itoa(max(int((retry+time.Second-1)/time.Second), storeFullRetryAfter)))
	abortError(c, http.StatusServiceUnavailable, typeServer, "store_unavailable", "store",
		"modelgate cannot keep responses right now (its record store refuses writes); try again shortly, or send store: false.")
}

// storeFullRetryAfter is the least Retry-After of a call refused while the store refuses
// writes, in seconds: a disk that filled or a Redis that went down is seldom back within
// one retry of the held records.
const storeFullRetryAfter = 5

func (s *Server) storeUnavailable(c *gin.Context, err error) {
	info(c).UpstreamErr = "store"
	s.log.Error("record store failed", slog.String("request_id", info(c).RequestID), slog.String("error", err.Error()))
	abortError(c, http.StatusServiceUnavailable, typeServer, "store_unavailable", "", "modelgate cannot reach its response store; try again shortly.")
}

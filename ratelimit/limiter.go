package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/config"
	"modelgate/redisconn"
)

// Options configure a Limiter.
type Options struct {
	Store        string // "memory" (or "") or "redis://..." / "rediss://..."
	OnStoreError string // "allow" (default) or "deny": what Admit does when Redis cannot be reached
	DataPath     string // bbolt directory for the memory store; "" = nothing persisted (tests)
	Now          func() time.Time
	Logger       *slog.Logger

	// FlushInterval is how often the memory store writes daily usage to DataPath; default 1s.
	FlushInterval time.Duration
	// LeaseTTL is how long a Redis concurrency slot outlives a replica that stopped renewing
	// it; default 30s.
	LeaseTTL time.Duration
	// StoreTimeout bounds one Redis round trip; default 500ms (redisconn.RequestBudget).
	StoreTimeout time.Duration
	// Redis is the connection when Store is "redis": one server, Sentinel or Cluster.
	Redis config.Redis
	// Guard is the Redis store's breaker, shared with the record store's client of the same
	// Redis; nil: one of the limiter's own.
	Guard *redisconn.Guard
}

// Scope is one set of budgets: "team:<name>", "key:<team>/<key>", "caller:<sha256 hex>" or
// "enduser:<team>/<end user label>".
type Scope struct {
	ID     string
	Limits config.Limits
}

// Request asks for room for one call.
type Request struct {
	Key  Scope
	Team *Scope // nil in passthrough mode
	// EndUser is the end user's scope inside the team (issue 28); nil when the request
	// names no end user or the team sets no end-user limits. Its ID starts "enduser:<team>/",
	// so on a Cluster it shares the team's slot.
	EndUser *Scope
	Shadow  bool  // report what would be refused, refuse nothing
	Tokens  int64 // reservation: input estimate + output cap
	// Input is the input estimate within Tokens; the rest is output. It splits the
	// reservation into input and output when a ticket is settled at it (see Close).
	Input int64
}

// Reason names the limit that refused a request.
type Reason string

const (
	ReasonNone             Reason = ""
	ReasonRequests         Reason = "requests"
	ReasonTokens           Reason = "tokens"
	ReasonConcurrency      Reason = "concurrency"
	ReasonDailyTokens      Reason = "daily_tokens"
	ReasonStoreUnavailable Reason = "store_unavailable"
)

// Decision is the answer to Admit.
type Decision struct {
	Allowed     bool
	Reason      Reason        // why it was refused
	Scope       string        // ID of the scope that refused
	RetryAfter  time.Duration // refusals: whole seconds, >= 1s
	WouldRefuse Reason        // shadow mode: what enforcement would have refused
	StoreError  bool          // the shared store failed; Allowed follows OnStoreError
	Headers     Headers
}

// RetryAfterSeconds is the Retry-After header value for a refusal.
func (d Decision) RetryAfterSeconds() int64 {
	return int64(roundRetry(d.RetryAfter) / time.Second)
}

// Usage is what a call really consumed.
type Usage struct {
	InputTokens, OutputTokens int64
	// Reported by the platform for billing and history; the limiter counts neither apart.
	CachedInputTokens, ReasoningTokens int64
}

// ScopeUsage is one scope's traffic for the current minute and UTC day and what remains of
// each of its limits (only limits that are set appear in Remaining).
type ScopeUsage struct {
	Scope              string           `json:"scope"`
	MinuteRequests     int64            `json:"minute_requests"`
	MinuteInputTokens  int64            `json:"minute_input_tokens"`
	MinuteOutputTokens int64            `json:"minute_output_tokens"`
	DayRequests        int64            `json:"day_requests"`
	DayInputTokens     int64            `json:"day_input_tokens"`
	DayOutputTokens    int64            `json:"day_output_tokens"`
	Remaining          map[string]int64 `json:"remaining"`
}

// Limiter admits requests against per-key and per-team budgets.
type Limiter struct {
	store    store
	now      func() time.Time
	log      *slog.Logger
	failOpen bool
	lastLog  atomic.Int64 // unix nanos of the last store-error log line

	// closeMu orders settles against Close: a settle holds it shared while it talks to the
	// store, Close holds it exclusively, so no settle runs on a closed store and none is
	// lost between the two.
	closeMu sync.RWMutex
	closed  bool
	openMu  sync.Mutex
	open    map[*Ticket]struct{} // admitted, not yet settled
}

// store is what a Limiter needs from its counters.
type store interface {
	admit(ctx context.Context, now time.Time, a *admission) (outcome, error)
	settle(ctx context.Context, now time.Time, t *Ticket, u Usage) error
	usage(ctx context.Context, now time.Time, scopes []Scope) ([]ScopeUsage, error)
	views(ctx context.Context, now time.Time, scopes []Scope) ([]view, error)
	close() error
}

// admission is one Admit call as the stores see it.
type admission struct {
	scopes [maxScopes]Scope
	n      int
	tokens int64
	shadow bool
	lease  string // Redis concurrency lease id
	// id names the ticket in the shared store, so an admit or settle whose reply was lost
	// can be sent again without counting twice.
	id string
}

// outcome is what a store reports: which limits failed, whether budgets were charged, and the
// scopes' state afterwards.
type outcome struct {
	fails   []failure
	charged bool // budgets were taken (false for refusals and shadow would-refuse)
	counted bool // the request appears in usage counts
	day     int64
	views   [maxScopes]view
}

// maxScopes is how many scopes one admission touches at most: the key, its team and an end
// user of the team.
const maxScopes = 3

// concurrencyLimited reports whether any scope limits concurrent requests (a Redis lease is
// then taken).
func (a *admission) concurrencyLimited() bool {
	for i := 0; i < a.n; i++ {
		if a.scopes[i].Limits.ConcurrentRequests > 0 {
			return true
		}
	}
	return false
}

// fill puts req's scopes into a, in the order key, team, end user.
func (a *admission) fill(req Request) {
	a.scopes[0], a.n = req.Key, 1
	if req.Team != nil {
		a.scopes[a.n] = *req.Team
		a.n++
	}
	if req.EndUser != nil {
		a.scopes[a.n] = *req.EndUser
		a.n++
	}
}

// New opens the configured store.
func New(opts Options) (*Limiter, error) {
	l := &Limiter{now: opts.Now, log: opts.Logger, open: map[*Ticket]struct{}{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	switch opts.OnStoreError {
	case "", "allow":
		l.failOpen = true
	case "deny":
	default:
		return nil, fmt.Errorf("ratelimit: on_store_error: want allow or deny, got %q", opts.OnStoreError)
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = redisconn.RequestBudget
	}
	var err error
	switch {
	case opts.Store == "" || opts.Store == "memory":
		l.store, err = newMemoryStore(opts, l.now, l.log)
	case redisconn.IsRedis(opts.Store):
		l.store, err = newRedisStore(opts, l.now, l.log)
	default:
		return nil, errors.New("ratelimit: store: want memory, redis, redis:// or rediss://")
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Close settles every ticket still open at its reservation, then flushes and releases the
// store. A drain that ran out of time leaves handlers running; their calls may have been
// billed, and the reservation is the bound modelgate reserved for them, so that is what the
// persisted counters keep. Tickets settled afterwards are ignored: they were settled here.
func (l *Limiter) Close() error {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.openMu.Lock()
	open := l.open
	l.open = map[*Ticket]struct{}{}
	l.openMu.Unlock()
	n := 0
	for t := range open {
		if t.done.Swap(true) {
			continue
		}
		n++
		if err := l.store.settle(context.Background(), l.now(), t, t.reserve); err != nil {
			l.storeFailed("settle", err)
		}
	}
	if n > 0 {
		l.log.Warn("billed, usage unknown: requests still running at shutdown settled at their reservation", "requests", n)
	}
	return l.store.close()
}

// Open is the number of admitted tickets not yet settled.
func (l *Limiter) Open() int {
	l.openMu.Lock()
	defer l.openMu.Unlock()
	return len(l.open)
}

// Admit checks the request against its key and team. When allowed it returns a Ticket that
// must be settled; when refused the Ticket is nil and nothing was charged. err is non-nil only
// when the store failed: then Decision.StoreError is set and Allowed follows OnStoreError.
func (l *Limiter) Admit(ctx context.Context, req Request) (*Ticket, Decision, error) {
	now := l.now()
	a := &admission{tokens: max(req.Tokens, 0), shadow: req.Shadow, id: newTicketID()}
	a.fill(req)
	out, err := l.store.admit(ctx, now, a)
	if err != nil && ctx.Err() == nil {
		// The reply may have been lost after the store admitted: once more, with the same
		// ticket, which the store answers from its record instead of counting twice.
		out, err = l.store.admit(ctx, now, a)
	}
	if err != nil {
		if ctx.Err() == nil { // a caller that went away is not a store outage
			l.storeFailed("admit", err)
		}
		// Whether the store admitted is unknown: the ticket still settles by its id, which
		// undoes the admission if it landed and does nothing if it did not.
		t := &Ticket{l: l, a: a, unsure: true, reserve: reservation(req), day: utcDay(now), ctx: settleContext(ctx)}
		l.track(t)
		if l.failOpen {
			return t, Decision{Allowed: true, StoreError: true}, err
		}
		t.refused = true
		t.Release()
		return nil, Decision{Reason: ReasonStoreUnavailable, StoreError: true, RetryAfter: time.Second}, err
	}
	d := Decision{Allowed: true, Headers: headersFor(now, a, out.views)}
	if len(out.fails) > 0 {
		worst, retry := verdict(out.fails)
		if !a.shadow {
			d.Allowed, d.Reason, d.Scope, d.RetryAfter = false, worst.reason, a.scopes[worst.scope].ID, retry
			return nil, d, nil
		}
		d.WouldRefuse = worst.reason
	}
	t := &Ticket{l: l, a: a, charged: out.charged, counted: out.counted, day: out.day, reserve: reservation(req), ctx: settleContext(ctx)}
	l.track(t)
	return t, d, nil
}

// settleContext is the context a ticket admitted under ctx settles with: not ctx, which
// ends with the request (and a settle must reach the store after a client left), but with
// the request's store budget, so a request that spent it on a hung store does not wait
// again to settle; the settle is then kept and retried in the background.
func settleContext(ctx context.Context) context.Context {
	return redisconn.KeepBudget(context.Background(), ctx)
}

func newTicketID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// reservation is what a request reserved, split into input and output.
func reservation(req Request) Usage {
	tokens := max(req.Tokens, 0)
	in := min(max(req.Input, 0), tokens)
	return Usage{InputTokens: in, OutputTokens: tokens - in}
}

func (l *Limiter) track(t *Ticket) {
	l.openMu.Lock()
	l.open[t] = struct{}{}
	l.openMu.Unlock()
}

func (l *Limiter) untrack(t *Ticket) {
	l.openMu.Lock()
	delete(l.open, t)
	l.openMu.Unlock()
}

// storeFailed logs a store error, at most once a second so an outage does not flood the log.
func (l *Limiter) storeFailed(op string, err error) {
	now := time.Now().UnixNano()
	last := l.lastLog.Load()
	if now-last < int64(time.Second) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	action := "denying"
	if l.failOpen {
		action = "allowing"
	}
	l.log.Warn("rate limit store unavailable", "op", op, "err", err.Error(), "on_store_error", action)
}

// Usage reports each scope's current minute and UTC day.
func (l *Limiter) Usage(ctx context.Context, scopes []Scope) ([]ScopeUsage, error) {
	return l.store.usage(ctx, l.now(), scopes)
}

// Peek returns the x-ratelimit-* headers req would see now, taking nothing from any budget:
// answers that are not admitted (model lists, requests refused before admission) carry them
// too.
func (l *Limiter) Peek(ctx context.Context, req Request) (Headers, error) {
	now := l.now()
	a, views, err := l.look(ctx, now, req, 0)
	if err != nil {
		return Headers{}, err
	}
	return headersFor(now, a, views), nil
}

// look reads req's scopes as they stand, for an admission of tokens that takes nothing.
func (l *Limiter) look(ctx context.Context, now time.Time, req Request, tokens int64) (*admission, [maxScopes]view, error) {
	a := &admission{tokens: max(tokens, 0)}
	a.fill(req)
	var views [maxScopes]view
	vs, err := l.store.views(ctx, now, a.scopes[:a.n])
	if err != nil {
		return a, views, err
	}
	copy(views[:], vs)
	return a, views, nil
}

// Ticket is an admitted request. Settle (or Release) it exactly once; more calls are ignored.
type Ticket struct {
	l       *Limiter
	a       *admission
	charged bool
	counted bool
	day     int64
	reserve Usage           // what was reserved: settled at Close if the ticket is still open
	unsure  bool            // the store's reply to the admission was lost: it may or may not have landed
	refused bool            // an unsure admission that was refused (on_store_error: deny)
	ctx     context.Context // the settle's: the request's store budget, no cancellation
	crashed bool            // settled by SettleCrashed for a previous life of the replica
	done    atomic.Bool
}

// Settle charges the real usage, refunds the rest of the reservation and frees the
// concurrency slot. A cancelled or failed call passes what it streamed. Safe to defer, safe on
// nil, idempotent.
func (t *Ticket) Settle(u Usage) {
	if t == nil || t.l == nil {
		return
	}
	l := t.l
	// Under the shared lock: either this settle completes before Close begins, or Close
	// settled the ticket at its reservation first and this one is ignored.
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if t.done.Swap(true) || l.closed {
		return
	}
	// The ticket counts as open until the store has its settle: Open() == 0 then means every
	// slot and token is back (the drain, and tests that wait for a freed slot, read it so).
	defer l.untrack(t)
	u.InputTokens, u.OutputTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0)
	if !t.charged && !t.counted && !t.unsure {
		return
	}
	if err := l.store.settle(t.ctx, l.now(), t, u); err != nil {
		l.storeFailed("settle", err)
	}
}

// Release is for a call that never reached upstream: everything is refunded except the
// request itself, which still counts against requests_per_minute.
func (t *Ticket) Release() { t.Settle(Usage{}) }

package redisconn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable is what a command gets without being sent: the store's breaker is open (a
// recent command found the store not answering), or the request it serves has spent its
// store budget. Callers treat it as any other store failure (on_store_error, a record not
// kept), only at once instead of after a timeout.
var ErrUnavailable = errors.New("redisconn: store unavailable (not answering recently); command not sent")

// ProbeAfter is how long the store's breaker stays open before one command is let through
// as a probe. A refusal by on_store_error: deny asks the client to retry after a second,
// the same figure.
const ProbeAfter = time.Second

// OpenAfter is how many commands in a row without an answer open the store's breaker. More
// than one, so that one command that missed its timeout on a loaded machine does not turn
// the whole store away for a second; few, so that a hung store is found within the first
// few requests, each of which waits one store timeout at most (its budget).
const OpenAfter = 3

// Guard is a circuit breaker on one Redis deployment, shared by every client of it (the
// limiter's counters and the record store), and the hook that holds each request to its
// store budget (WithBudget). A hung Redis (a stopped process, a dropped network path) costs
// a command its whole timeout, and a request makes several: without the guard every request
// paid several timeouts and throughput fell to a few requests a second.
//
// The breaker opens after OpenAfter commands in a row fail for want of an answer (a timeout,
// a refused or broken connection, a pool with no free connection): a store on the local
// network answers in a millisecond, so a few such failures with no answer between them are a
// clear sign. While open every command fails at once with ErrUnavailable. After ProbeAfter the next command is sent as
// the one probe (the others still fail at once); its answer closes the breaker, its failure
// opens it for ProbeAfter again. A reply, even an error reply (NOSCRIPT, MOVED) or a
// missing key, is an answer.
type Guard struct {
	now func() time.Time
	log *slog.Logger

	open atomic.Bool // read without the lock on every command
	// streak counts the commands in a row without an answer while closed.
	streak atomic.Int32
	mu     sync.Mutex
	// until is when the open breaker lets a probe through; probing says one is out.
	until   time.Time
	probing bool
}

// NewGuard builds a closed Guard; now and log may be nil (time.Now, silent).
func NewGuard(now func() time.Time, log *slog.Logger) *Guard {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{now: now, log: log}
}

// Open reports whether the breaker is open (or half-open, a probe out): for readiness and
// tests.
func (g *Guard) Open() bool { return g != nil && g.open.Load() }

// allow says whether a command may be sent now and whether it is the probe.
func (g *Guard) allow() (ok, probe bool) {
	if !g.open.Load() {
		return true, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open.Load() {
		return true, false
	}
	if g.probing || g.now().Before(g.until) {
		return false, false
	}
	g.probing = true
	return true, true
}

// outcome is what a sent command said about the store.
type outcome int

const (
	answered outcome = iota // a reply came: the store is up
	noAnswer                // timed out or could not connect: the store is not answering
	unknown                 // the caller gave up first: nothing learnt
)

// judge classifies a command's error.
func judge(err error) outcome {
	var reply redis.Error
	switch {
	case err == nil, errors.Is(err, redis.Nil), errors.As(err, &reply):
		return answered
	case errors.Is(err, context.Canceled), errors.Is(err, ErrUnavailable):
		return unknown
	}
	return noAnswer
}

// report moves the breaker by a sent command's outcome. Only the probe closes an open
// breaker: an answer to a command sent before it opened says nothing of now.
func (g *Guard) report(probe bool, o outcome) {
	if !probe {
		switch {
		case o == answered && g.streak.Load() != 0: // a read first: the common case writes nothing
			g.streak.Store(0)
			return
		case o != noAnswer:
			return
		case g.streak.Add(1) < OpenAfter && !g.open.Load():
			return
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if probe {
		g.probing = false // a probe whose caller left frees the next command to probe
	}
	switch {
	case o == answered:
		g.open.Store(false)
		g.streak.Store(0)
		g.log.Info("redis store answering again; store breaker closed")
	case o == noAnswer:
		if !g.open.Load() {
			g.log.Warn("redis store not answering; store breaker open, on_store_error applies at once", "probe_after", ProbeAfter.String())
		}
		g.open.Store(true)
		g.until = g.now().Add(ProbeAfter)
	}
}

// sendingKey marks the context of a command the guard let through. go-redis runs a new
// connection's handshake (HELLO, AUTH, SELECT) through the same hooks, with the command's
// context: those are part of the command already admitted, and must not be refused by the
// breaker they are probing for.
type sendingKey struct{}

// do runs one command (or pipeline) under the guard and ctx's budget; fail sets the error
// on the command(s) when they are not sent.
func (g *Guard) do(ctx context.Context, send func(context.Context) error, fail func(error)) error {
	if ctx.Value(sendingKey{}) != nil {
		return send(ctx)
	}
	b := budgetOf(ctx)
	var left time.Duration
	if b != nil {
		if left = b.left(); left <= 0 {
			fail(ErrUnavailable)
			return ErrUnavailable
		}
	}
	ok, probe := g.allow()
	if !ok {
		fail(ErrUnavailable)
		return ErrUnavailable
	}
	ctx = context.WithValue(ctx, sendingKey{}, true)
	if b != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	start := time.Now()
	err := send(ctx)
	o := judge(err)
	if b != nil && o == noAnswer {
		b.spend(time.Since(start))
	}
	g.report(probe, o)
	return err
}

// Hook is the go-redis hook that applies g to a client's every command and pipeline.
func (g *Guard) hook() redis.Hook { return guardHook{g} }

type guardHook struct{ g *Guard }

func (h guardHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h guardHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.g.do(ctx, func(ctx context.Context) error { return next(ctx, cmd) }, cmd.SetErr)
	}
}

func (h guardHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.g.do(ctx, func(ctx context.Context) error { return next(ctx, cmds) }, func(err error) {
			for _, c := range cmds {
				c.SetErr(err)
			}
		})
	}
}

package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/config"
	"modelgate/redisconn"
)

const (
	keyPrefix = "mg:rl:"
	dayKeyTTL = 3 * 24 * time.Hour // a day's counters outlive the day long enough for late settles and reports

	// ticketTTL is how long Redis remembers an admission and its settle, so that either can
	// be sent again without counting twice. A failed settle is retried for settleRetryWindow,
	// which ends before the ticket is forgotten; after that it is dropped and logged.
	ticketTTL         = 15 * time.Minute
	settleRetryWindow = 10 * time.Minute
	settleRetryEvery  = time.Second
	maxPendingSettles = 100000 // beyond it the oldest failed settle is dropped (and logged)
)

// redisStore shares every counter between replicas through Redis: one server, a Sentinel
// master or a Cluster.
type redisStore struct {
	rdb      *redisconn.Client
	now      func() time.Time
	log      *slog.Logger
	timeout  time.Duration
	leaseTTL time.Duration

	leases sync.Map // lease id -> *admission: this replica's live concurrency slots, renewed
	stop   chan struct{}
	done   chan struct{}

	pendingMu sync.Mutex
	pending   []pendingSettle // failed settles, retried in the background

	// intercept, when set, runs each script call (op "admit" or "settle"); tests use it to
	// lose a reply or fail a call.
	intercept func(op string, run func() error) error
}

// pendingSettle is a settle that failed, kept to be sent again.
type pendingSettle struct {
	t     *Ticket
	u     Usage
	now   time.Time // when it was first sent: its minute
	until time.Time // retried until then
}

func newRedisStore(opts Options, now func() time.Time, log *slog.Logger) (*redisStore, error) {
	rdb, err := redisconn.New(config.Ratelimit{Store: opts.Store, Redis: opts.Redis}, opts.StoreTimeout, opts.Guard)
	if err != nil {
		return nil, err
	}
	r := &redisStore{
		rdb: rdb, now: now, log: log, timeout: opts.StoreTimeout, leaseTTL: opts.LeaseTTL,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StoreTimeout)
	defer cancel()
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		// Starting anyway keeps a Redis outage from becoming a gateway outage; Admit applies
		// on_store_error until Redis is back.
		log.Warn("rate limit store unreachable at start", "err", err.Error())
	}
	go r.renewLoop()
	return r, nil
}

// do runs one script call, through intercept when a test set one.
func (r *redisStore) do(op string, run func() error) error {
	if r.intercept != nil {
		return r.intercept(op, run)
	}
	return run()
}

// slotTag is the part of a scope's keys that Redis Cluster hashes: the team for a team and
// its keys, so one admission's scripts touch a single slot. Passthrough callers and the
// limits they share share one tag for the same reason.
func slotTag(id string) string {
	switch {
	case strings.HasPrefix(id, "team:"):
		return id[len("team:"):]
	case strings.HasPrefix(id, "key:"):
		if team, _, ok := strings.Cut(id[len("key:"):], "/"); ok {
			return team
		}
	case strings.HasPrefix(id, "enduser:"):
		if team, _, ok := strings.Cut(id[len("enduser:"):], "/"); ok {
			return team
		}
	case strings.HasPrefix(id, "caller:"), strings.HasPrefix(id, "passthrough:"):
		return "passthrough"
	}
	return id
}

// Key names: mg:rl:<kind>:<scope>, with a {tag} after the prefix on a Cluster.
func (r *redisStore) scopeKey(kind, id string) string {
	return keyPrefix + r.rdb.HashTag(slotTag(id)) + kind + ":" + id
}
func (r *redisStore) dayKey(day int64, id string) string {
	return keyPrefix + r.rdb.HashTag(slotTag(id)) + "day:" + dayString(day) + ":" + id
}
func (r *redisStore) minuteKey(minute int64, id string) string {
	return keyPrefix + r.rdb.HashTag(slotTag(id)) + "min:" + strconv.FormatInt(minute, 10) + ":" + id
}

// An admission's ticket lives in the slot of its first scope, beside the counters its
// scripts touch.
func (r *redisStore) ticketKey(a *admission) string {
	return keyPrefix + r.rdb.HashTag(slotTag(a.scopes[0].ID)) + "tk:" + a.id
}
func (r *redisStore) settledKey(a *admission) string { return r.ticketKey(a) + ":settled" }

func micros(t time.Time) int64 { return t.UnixMicro() }

func (r *redisStore) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, r.timeout)
}

func (r *redisStore) admit(parent context.Context, now time.Time, a *admission) (outcome, error) {
	day, minute := utcDay(now), minuteOf(now)
	if a.lease == "" && a.concurrencyLimited() {
		// Kept across a retry of the same admission: the slot it took is that lease.
		a.lease = newLeaseID()
	}
	keys := make([]string, 0, 5*a.n)
	args := make([]any, 0, 8+4*a.n)
	shadow := "0"
	if a.shadow {
		shadow = "1"
	}
	args = append(args, micros(now), a.n, a.tokens, shadow, a.lease, micros(now.Add(r.leaseTTL)),
		(2 * r.leaseTTL).Milliseconds(), int64(dayKeyTTL/time.Second))
	for i := 0; i < a.n; i++ {
		id, lim := a.scopes[i].ID, a.scopes[i].Limits
		keys = append(keys, r.scopeKey("rpm", id), r.scopeKey("tpm", id), r.scopeKey("conc", id),
			r.dayKey(day, id), r.minuteKey(minute, id))
		args = append(args, lim.RequestsPerMinute, lim.TokensPerMinute, lim.ConcurrentRequests, lim.TokensPerDay)
	}
	keys = append(keys, r.ticketKey(a))
	args = append(args, int64(ticketTTL/time.Second))
	ctx, cancel := r.ctx(parent)
	defer cancel()
	var res []string
	err := r.do("admit", func() error {
		var err error
		res, err = admitScript.Run(ctx, r.rdb, keys, args...).StringSlice()
		return err
	})
	if err != nil {
		return outcome{}, err
	}
	if len(res) != 2+4*a.n {
		return outcome{}, fmt.Errorf("ratelimit: admit script returned %d values", len(res))
	}
	out := outcome{charged: res[0] == "1", counted: res[1] == "1", day: day}
	midnight := untilMidnight(now)
	for i := 0; i < a.n; i++ {
		v, err := parseView(res[2+4*i : 6+4*i])
		if err != nil {
			return outcome{}, err
		}
		// The script decided; the same checks on the same numbers name the limits and waits.
		out.fails = checkScope(out.fails, i, a.scopes[i].Limits, v, a.tokens, midnight)
		if out.charged {
			v.rpmLevel--
			v.tpmLevel -= float64(a.tokens)
			v.inflight++
			v.dayCharged += a.tokens
		}
		out.views[i] = v
	}
	if out.charged {
		out.fails = nil
		if a.lease != "" {
			r.leases.Store(a.lease, a)
		}
	} else if len(out.fails) == 0 {
		return outcome{}, errors.New("ratelimit: admit script refused without a failing limit")
	}
	return out, nil
}

func parseView(s []string) (view, error) {
	var v view
	var err [4]error
	v.rpmLevel, err[0] = strconv.ParseFloat(s[0], 64)
	v.tpmLevel, err[1] = strconv.ParseFloat(s[1], 64)
	v.inflight, err[2] = strconv.ParseInt(s[2], 10, 64)
	v.dayCharged, err[3] = strconv.ParseInt(s[3], 10, 64)
	if e := errors.Join(err[:]...); e != nil {
		return v, fmt.Errorf("ratelimit: admit script reply: %w", e)
	}
	return v, nil
}

// settle sends a ticket's settle; one that fails is kept and sent again in the background
// (see retryPending) until it lands or its window passes.
func (r *redisStore) settle(parent context.Context, now time.Time, t *Ticket, u Usage) error {
	if t.a.lease != "" {
		r.leases.Delete(t.a.lease)
	}
	err := r.sendSettle(parent, now, t, u)
	if err != nil {
		r.keepPending(pendingSettle{t: t, u: u, now: now, until: r.now().Add(settleRetryWindow)})
	}
	return err
}

func (r *redisStore) sendSettle(parent context.Context, now time.Time, t *Ticket, u Usage) error {
	a := t.a
	minute := minuteOf(now)
	used := u.InputTokens + u.OutputTokens
	charged := "0"
	switch {
	case t.unsure && t.refused:
		charged = "!" // undo the admission if it landed; the request itself was refused
	case t.unsure:
		charged = "?" // the script reads it from the ticket, if the admission landed at all
	case t.charged:
		charged = "1"
	}
	keys := make([]string, 0, 4*a.n+2)
	args := []any{micros(now), a.n, charged, a.tokens - used, u.InputTokens, u.OutputTokens, a.lease,
		int64(dayKeyTTL / time.Second), strconv.FormatInt(used-a.tokens, 10)}
	for i := 0; i < a.n; i++ {
		id := a.scopes[i].ID
		keys = append(keys, r.scopeKey("tpm", id), r.scopeKey("conc", id), r.dayKey(t.day, id), r.minuteKey(minute, id))
		args = append(args, a.scopes[i].Limits.TokensPerMinute)
	}
	keys = append(keys, r.ticketKey(a), r.settledKey(a))
	args = append(args, int64(ticketTTL/time.Second))
	ctx, cancel := r.ctx(parent)
	defer cancel()
	return r.do("settle", func() error { return settleScript.Run(ctx, r.rdb, keys, args...).Err() })
}

func (r *redisStore) keepPending(p pendingSettle) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	if len(r.pending) >= maxPendingSettles {
		r.log.Warn("rate limit settle dropped: too many failed settles waiting", "ticket", r.pending[0].t.a.id)
		r.pending = r.pending[1:]
	}
	r.pending = append(r.pending, p)
}

// retryPending sends every failed settle again, keeps those that fail once more and drops
// those whose window has passed. It returns how many are still waiting.
func (r *redisStore) retryPending() int {
	r.pendingMu.Lock()
	batch := r.pending
	r.pending = nil
	r.pendingMu.Unlock()
	now := r.now()
	var again []pendingSettle
	for _, p := range batch {
		if now.After(p.until) {
			r.log.Warn("rate limit settle dropped: its retry window passed", "ticket", p.t.a.id,
				"input_tokens", p.u.InputTokens, "output_tokens", p.u.OutputTokens)
			continue
		}
		if err := r.sendSettle(context.Background(), p.now, p.t, p.u); err != nil {
			again = append(again, p)
		}
	}
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	r.pending = append(again, r.pending...)
	return len(r.pending)
}

func (r *redisStore) usage(parent context.Context, now time.Time, scopes []Scope) ([]ScopeUsage, error) {
	rs, err := r.read(parent, now, scopes)
	if err != nil {
		return nil, err
	}
	out := make([]ScopeUsage, len(scopes))
	for i, sc := range scopes {
		d, m := rs[i].day, rs[i].minute
		out[i] = ScopeUsage{
			Scope:          sc.ID,
			MinuteRequests: m[0], MinuteInputTokens: m[1], MinuteOutputTokens: m[2],
			DayRequests: d[1], DayInputTokens: d[2], DayOutputTokens: d[3],
			Remaining: remaining(sc.Limits, rs[i].view),
		}
	}
	return out, nil
}

func (r *redisStore) views(parent context.Context, now time.Time, scopes []Scope) ([]view, error) {
	rs, err := r.read(parent, now, scopes)
	if err != nil {
		return nil, err
	}
	out := make([]view, len(rs))
	for i := range rs {
		out[i] = rs[i].view
	}
	return out, nil
}

// scopeRead is one scope's state as read, without changing anything.
type scopeRead struct {
	view        view
	day, minute []int64 // day: charged, requests, in, out; minute: requests, in, out
}

// read fetches the scopes' buckets and counters in one pipelined round trip.
func (r *redisStore) read(parent context.Context, now time.Time, scopes []Scope) ([]scopeRead, error) {
	day, minute, nowNs := utcDay(now), minuteOf(now), now.UnixNano()
	ctx, cancel := r.ctx(parent)
	defer cancel()
	type cmds struct {
		rpm, tpm, dayC, minC *redis.SliceCmd
		conc                 *redis.IntCmd
	}
	cs := make([]cmds, len(scopes))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sc := range scopes {
			cs[i] = cmds{
				rpm:  p.HMGet(ctx, r.scopeKey("rpm", sc.ID), "l", "t"),
				tpm:  p.HMGet(ctx, r.scopeKey("tpm", sc.ID), "l", "t"),
				conc: p.ZCount(ctx, r.scopeKey("conc", sc.ID), "("+strconv.FormatInt(micros(now), 10), "+inf"),
				dayC: p.HMGet(ctx, r.dayKey(day, sc.ID), "c", "r", "i", "o"),
				minC: p.HMGet(ctx, r.minuteKey(minute, sc.ID), "r", "i", "o"),
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]scopeRead, len(scopes))
	for i, sc := range scopes {
		d := ints(cs[i].dayC.Val())
		out[i] = scopeRead{
			view: view{
				rpmLevel:   storedLevel(cs[i].rpm.Val(), nowNs, sc.Limits.RequestsPerMinute),
				tpmLevel:   storedLevel(cs[i].tpm.Val(), nowNs, sc.Limits.TokensPerMinute),
				inflight:   cs[i].conc.Val(),
				dayCharged: d[0],
			},
			day:    d,
			minute: ints(cs[i].minC.Val()),
		}
	}
	return out, nil
}

// storedLevel is a bucket's level now, from the script's fields (level, last update in µs).
func storedLevel(vals []any, nowNs int64, capacity int64) float64 {
	if capacity <= 0 {
		return 0
	}
	f := strs(vals)
	l, err1 := strconv.ParseFloat(f[0], 64)
	t, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return float64(capacity)
	}
	b := bucket{level: l, last: t * int64(time.Microsecond), init: true}
	b.refill(nowNs, capacity)
	return b.level
}

func strs(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i], _ = v.(string)
	}
	return out
}

func ints(vals []any) []int64 {
	out := make([]int64, len(vals))
	for i, s := range strs(vals) {
		out[i], _ = strconv.ParseInt(s, 10, 64)
	}
	return out
}

// renewLoop keeps this replica's slots alive. A replica that dies stops renewing, and its
// slots fall out of every count LeaseTTL later.
// It also sends failed settles again, every settleRetryEvery while any wait.
func (r *redisStore) renewLoop() {
	defer close(r.done)
	tick := time.NewTicker(r.leaseTTL / 3)
	defer tick.Stop()
	retry := time.NewTicker(settleRetryEvery)
	defer retry.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			if err := r.renew(); err != nil {
				r.log.Warn("rate limit lease renewal failed", "err", err.Error())
			}
		case <-retry.C:
			r.pendingMu.Lock()
			waiting := len(r.pending) > 0
			r.pendingMu.Unlock()
			if waiting {
				r.retryPending()
			}
		}
	}
}

func (r *redisStore) renew() error {
	exp := float64(micros(r.now().Add(r.leaseTTL)))
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	p := r.rdb.Pipeline()
	r.leases.Range(func(k, v any) bool {
		a := v.(*admission)
		for i := 0; i < a.n; i++ {
			if a.scopes[i].Limits.ConcurrentRequests > 0 {
				key := r.scopeKey("conc", a.scopes[i].ID)
				p.ZAddXX(ctx, key, redis.Z{Score: exp, Member: a.lease})
				p.PExpire(ctx, key, 2*r.leaseTTL)
			}
		}
		return true
	})
	if p.Len() == 0 {
		return nil
	}
	_, err := p.Exec(ctx)
	return err
}

func (r *redisStore) close() error {
	close(r.stop)
	<-r.done
	if n := r.retryPending(); n > 0 {
		r.log.Warn("rate limit settles lost at shutdown: Redis could not be reached", "settles", n)
	}
	return r.rdb.Close()
}

func newLeaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

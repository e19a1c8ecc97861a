package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"modelgate/config"
	"modelgate/periodic"
)

// memScope is one scope's counters. Each has its own mutex: admissions of unrelated keys
// never contend, and a team is only contended by its own keys.
type memScope struct {
	mu      sync.Mutex
	id      string
	evicted bool // removed from the map; whoever still holds it must look it up again
	lim     config.Limits

	rpm, tpm bucket
	inflight int64

	day                               int64 // UTC day the day counters belong to
	dayCharged, dayReq, dayIn, dayOut int64
	minute, minReq, minIn, minOut     int64
	dirty                             bool // day counters changed since the last flush
}

// roll starts fresh day and minute counters when the clock has moved past them.
func (s *memScope) roll(day, minute int64) {
	if s.day != day {
		s.day, s.dayCharged, s.dayReq, s.dayIn, s.dayOut = day, 0, 0, 0, 0
	}
	if s.minute != minute {
		s.minute, s.minReq, s.minIn, s.minOut = minute, 0, 0, 0
	}
}

// refill brings both buckets to now under the scope's current limits.
func (s *memScope) refill(nowNs int64, lim config.Limits) {
	s.lim = lim
	if lim.RequestsPerMinute > 0 {
		s.rpm.refill(nowNs, lim.RequestsPerMinute)
	}
	if lim.TokensPerMinute > 0 {
		s.tpm.refill(nowNs, lim.TokensPerMinute)
	}
}

func (s *memScope) view() view {
	return view{rpmLevel: s.rpm.level, tpmLevel: s.tpm.level, inflight: s.inflight, dayCharged: s.dayCharged}
}

// memoryStore keeps counters in this process and the day counters in bbolt.
type memoryStore struct {
	scopes sync.Map // scope id -> *memScope
	db     *boltDB  // nil: nothing persisted
	now    func() time.Time
	log    *slog.Logger

	stop context.CancelFunc // ends the flush loop
	done chan struct{}      // closed once the flush loop returned
}

func newMemoryStore(opts Options, now func() time.Time, log *slog.Logger) (*memoryStore, error) {
	m := &memoryStore{now: now, log: log, done: make(chan struct{})}
	if opts.DataPath != "" {
		db, err := openBolt(opts.DataPath)
		if err != nil {
			return nil, err
		}
		m.db = db
	}
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.flushLoop(ctx, opts.FlushInterval)
	return m, nil
}

// get returns the scope's counters, loading today's persisted day counters on first use.
func (m *memoryStore) get(id string, day int64) *memScope {
	if v, ok := m.scopes.Load(id); ok {
		return v.(*memScope)
	}
	s := &memScope{id: id, day: day}
	if m.db != nil {
		rec, err := m.db.loadDay(id, day)
		if err != nil {
			m.log.Error("rate limit data store read failed", "err", err.Error())
		}
		s.dayCharged, s.dayReq, s.dayIn, s.dayOut = rec.charged, rec.req, rec.in, rec.out
	}
	v, _ := m.scopes.LoadOrStore(id, s)
	return v.(*memScope)
}

// scopeLocks are the distinct scopes one admission locked, in lock order.
type scopeLocks struct {
	s [maxScopes]*memScope
	n int
}

func (l *scopeLocks) unlock() {
	for i := l.n - 1; i >= 0; i-- {
		l.s[i].mu.Unlock()
	}
}

// lockScopes locks the request's scopes in id order, so two requests sharing some never
// wait on each other in a cycle. It retries when one was evicted between lookup and lock.
func (m *memoryStore) lockScopes(a *admission, day int64) (ss [maxScopes]*memScope, locks scopeLocks) {
	for {
		locks = scopeLocks{}
		for i := 0; i < a.n; i++ {
			ss[i] = m.get(a.scopes[i].ID, day)
			dup := false
			for _, o := range locks.s[:locks.n] {
				dup = dup || o == ss[i]
			}
			if !dup {
				locks.s[locks.n] = ss[i]
				locks.n++
			}
		}
		order := locks.s[:locks.n]
		// At most three: an insertion sort by id.
		for i := 1; i < len(order); i++ {
			for j := i; j > 0 && order[j].id < order[j-1].id; j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
		evicted := false
		for _, s := range order {
			s.mu.Lock()
			evicted = evicted || s.evicted
		}
		if !evicted {
			return ss, locks
		}
		locks.unlock()
	}
}

func (m *memoryStore) admit(_ context.Context, now time.Time, a *admission) (outcome, error) {
	day, minute, nowNs := utcDay(now), minuteOf(now), now.UnixNano()
	ss, locks := m.lockScopes(a, day)
	defer locks.unlock()

	var fails []failure
	midnight := untilMidnight(now)
	for i := 0; i < a.n; i++ {
		s, lim := ss[i], a.scopes[i].Limits
		s.roll(day, minute)
		s.refill(nowNs, lim)
		fails = checkScope(fails, i, lim, s.view(), a.tokens, midnight)
	}
	out := outcome{fails: fails, day: day, charged: len(fails) == 0}
	out.counted = out.charged || a.shadow
	for i := 0; i < a.n; i++ {
		s, lim := ss[i], a.scopes[i].Limits
		if out.charged {
			if lim.RequestsPerMinute > 0 {
				s.rpm.level--
			}
			if lim.TokensPerMinute > 0 {
				s.tpm.level -= float64(a.tokens)
			}
			s.inflight++
			s.dayCharged += a.tokens
		}
		if out.counted {
			s.minReq++
			s.dayReq++
			s.dirty = true
		}
		out.views[i] = s.view()
	}
	return out, nil
}

func (m *memoryStore) settle(_ context.Context, now time.Time, t *Ticket, u Usage) error {
	day, minute, nowNs := utcDay(now), minuteOf(now), now.UnixNano()
	ss, locks := m.lockScopes(t.a, day)
	defer locks.unlock()
	used := u.InputTokens + u.OutputTokens
	for i := 0; i < t.a.n; i++ {
		s, lim := ss[i], t.a.scopes[i].Limits
		s.roll(day, minute)
		if t.charged {
			if lim.TokensPerMinute > 0 {
				s.tpm.refill(nowNs, lim.TokensPerMinute)
				s.tpm.add(float64(t.a.tokens-used), lim.TokensPerMinute)
			}
			s.inflight = max(s.inflight-1, 0)
		}
		// After midnight the admission day's counters are gone from memory; the new day is
		// not charged for a request it did not admit.
		if s.day == t.day {
			if t.charged {
				s.dayCharged += used - t.a.tokens
			}
			s.dayIn += u.InputTokens
			s.dayOut += u.OutputTokens
			if t.crashed && s.dayCharged < s.dayIn+s.dayOut {
				// The admission may have been killed before a flush wrote its reservation.
				s.dayCharged = s.dayIn + s.dayOut
			}
			s.dirty = true
		}
		s.minIn += u.InputTokens
		s.minOut += u.OutputTokens
	}
	return nil
}

func (m *memoryStore) usage(_ context.Context, now time.Time, scopes []Scope) ([]ScopeUsage, error) {
	out := make([]ScopeUsage, 0, len(scopes))
	for _, sc := range scopes {
		m.withScope(now, sc, func(s *memScope) {
			out = append(out, ScopeUsage{
				Scope:          sc.ID,
				MinuteRequests: s.minReq, MinuteInputTokens: s.minIn, MinuteOutputTokens: s.minOut,
				DayRequests: s.dayReq, DayInputTokens: s.dayIn, DayOutputTokens: s.dayOut,
				Remaining: remaining(sc.Limits, s.view()),
			})
		})
	}
	return out, nil
}

func (m *memoryStore) views(_ context.Context, now time.Time, scopes []Scope) ([]view, error) {
	out := make([]view, 0, len(scopes))
	for _, sc := range scopes {
		m.withScope(now, sc, func(s *memScope) { out = append(out, s.view()) })
	}
	return out, nil
}

// withScope runs f on one scope brought up to now, under its lock.
func (m *memoryStore) withScope(now time.Time, sc Scope, f func(*memScope)) {
	day := utcDay(now)
	a := &admission{n: 1}
	a.scopes[0] = sc
	ss, locks := m.lockScopes(a, day)
	defer locks.unlock()
	ss[0].roll(day, minuteOf(now))
	ss[0].refill(now.UnixNano(), sc.Limits)
	f(ss[0])
}

// remaining lists what is left of each limit that is set.
func remaining(lim config.Limits, v view) map[string]int64 {
	r := make(map[string]int64, 4)
	if lim.RequestsPerMinute > 0 {
		r["requests_per_minute"] = bucketTrio(lim.RequestsPerMinute, v.rpmLevel).remaining
	}
	if lim.TokensPerMinute > 0 {
		r["tokens_per_minute"] = bucketTrio(lim.TokensPerMinute, v.tpmLevel).remaining
	}
	if lim.ConcurrentRequests > 0 {
		r["concurrent_requests"] = max(lim.ConcurrentRequests-v.inflight, 0)
	}
	if lim.TokensPerDay > 0 {
		r["tokens_per_day"] = max(lim.TokensPerDay-v.dayCharged, 0)
	}
	return r
}

func (m *memoryStore) close() error {
	m.stop()
	<-m.done
	if m.db == nil {
		return nil
	}
	err := m.flush()
	if cerr := m.db.close(); err == nil {
		err = cerr
	}
	return err
}

func (m *memoryStore) flushLoop(ctx context.Context, every time.Duration) {
	defer close(m.done)
	periodic.Every(ctx, every, func(context.Context) {
		if err := m.flush(); err != nil {
			m.log.Error("rate limit data store write failed", "err", err.Error())
		}
	})
}

// flush writes changed day counters and forgets scopes that carry nothing worth keeping in
// memory: idle, full buckets, no counters of this minute, and day counters that are either
// safely written (in an earlier pass) or, without a data store, empty or from a past day.
func (m *memoryStore) flush() error {
	now := m.now()
	day, minute, nowNs := utcDay(now), minuteOf(now), now.UnixNano()
	var recs []dayRecord
	var written []*memScope
	m.scopes.Range(func(k, v any) bool {
		s := v.(*memScope)
		s.mu.Lock()
		switch {
		case s.dirty && m.db != nil:
			recs = append(recs, dayRecord{scope: s.id, day: s.day, charged: s.dayCharged, req: s.dayReq, in: s.dayIn, out: s.dayOut})
			written = append(written, s)
			s.dirty = false
		case s.inflight == 0 && s.minute != minute &&
			s.rpm.full(nowNs, s.lim.RequestsPerMinute) && s.tpm.full(nowNs, s.lim.TokensPerMinute) &&
			(m.db != nil || s.day != day || (s.dayReq == 0 && s.dayCharged == 0)):
			s.evicted = true
			m.scopes.Delete(k)
		}
		s.mu.Unlock()
		return true
	})
	if m.db == nil {
		return nil
	}
	err := m.db.writeDays(recs, now)
	if err != nil {
		for _, s := range written {
			s.mu.Lock()
			s.dirty = true
			s.mu.Unlock()
		}
	}
	return err
}

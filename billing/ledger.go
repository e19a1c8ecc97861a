package billing

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"modelgate/store"
)

// spendBucket holds one counter record per scope and period: "d20261126|team:search" and
// "m202611|key:search/prod", each with a "micros" counter.
const spendBucket = "spend"

// Budget is one scope's spend limits in micro-units; 0 = no limit.
type Budget struct {
	Scope            string // limiter scope id: "team:<name>", "key:<team>/<key>" or "enduser:<team>/<user>"
	PerDay, PerMonth int64
	// DayOnly keeps no monthly total for the scope (an end user's, issue 28: there may be
	// many, and only a daily budget is asked of them); PerMonth is then ignored.
	DayOnly bool
}

// maxBudgets is how many budgets one call is held against: its key's, its team's and its
// end user's.
const maxBudgets = 3

// Refusal says which budget refused a reservation.
type Refusal struct {
	Scope  string
	Period string // "day" or "month"
	// TooLarge: the budget is not spent, but the call's upper bound exceeds what is left of
	// it (a call that could cost more than a whole budget is refused even when it is
	// untouched, so a budget is never overrun).
	TooLarge bool
}

// total is one scope's spend in one period. base is what the store held at the last sync
// (this replica's flushed spend included), pending what this replica charged since, and
// reserved what admitted calls may still cost.
type total struct{ base, pending, flushing, reserved int64 }

// charged counts spend on its way to the store too, so a flush never opens a window in
// which a budget looks less spent than it is.
func (t *total) charged() int64 { return t.base + t.pending + t.flushing }

// Ledger enforces spend budgets the way the limiter enforces tokens_per_day: admission
// reserves what a call may cost at most, settlement charges what it did cost. Decisions
// are taken in memory under one lock, so a burst of parallel calls is admitted exactly;
// spend is flushed to the store every second and read back from it, so it survives restarts
// and replicas sharing a Redis store see each other's spend within about a second.
type Ledger struct {
	st  store.Store // nil: in memory only
	now func() time.Time
	log *slog.Logger

	// health hears of each flush's outcome (nil: no one).
	health *store.WriteHealth

	mu     sync.Mutex
	totals map[periodScope]*total
	days   periodNames
}

// periodScope names one total: a period ("d20261126" or "m202611") and a scope.
type periodScope struct{ period, scope string }

func (k periodScope) storeKey() string { return k.period + "|" + k.scope }

// periodNames caches the current day's and month's names, so the request path formats no
// dates: they change once a day.
type periodNames struct {
	unixDay    int64
	day, month string
}

func (p *periodNames) at(now time.Time) (day, month string) {
	d := now.Unix() / 86400
	if p.day == "" || d != p.unixDay {
		p.unixDay, p.day, p.month = d, dayKey(now), monthKey(now)
	}
	return p.day, p.month
}

// NewLedger loads the current day's and month's spend from st (nil: nothing kept). A store
// that cannot be read is logged, not fatal; the error result is always nil today.
func NewLedger(ctx context.Context, st store.Store, now func() time.Time, log *slog.Logger) (*Ledger, error) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Ledger{st: st, now: now, log: log, totals: map[periodScope]*total{}}
	if err := l.sync(ctx); err != nil {
		// Serving matters more than a budget's first second: Run syncs again each second.
		log.Warn("spend: could not read the spend so far; budgets count from what this replica sees until the store answers", "err", err.Error())
	}
	return l, nil
}

// ReportWrites has every flush's outcome told to h (its failures counted, /readyz
// degraded while they fail). Call it before Run.
func (l *Ledger) ReportWrites(h *store.WriteHealth) { l.health = h }

func dayKey(t time.Time) string   { return "d" + t.UTC().Format("20060102") }
func monthKey(t time.Time) string { return "m" + t.UTC().Format("200601") }

func (l *Ledger) get(period, scope string) *total {
	k := periodScope{period, scope}
	t := l.totals[k]
	if t == nil {
		t = &total{}
		l.totals[k] = t
	}
	return t
}

// Hold is an admitted call's reservation. Settle or Cancel it once; later calls are no-ops.
type Hold struct {
	// totals are the day and month totals of each scope, held here so settling looks
	// nothing up; a total with a reservation on it is never dropped by sync.
	totals [2 * maxBudgets]*total
	n      int
	l      *Ledger
	amount int64
	done   bool
}

// Reserve admits a call that may cost up to amount micro-units against every budget (at
// most three: a key, its team and an end user), or names the budget it would overrun. Unlike
// tokens_per_day, a reservation must fit in what is left of each budget, whole: a budget is
// money, and one call larger than all of it is refused rather than let through to overrun
// it. Every scope is charged, limited or not, so the spend of every team and key can be
// reported.
func (l *Ledger) Reserve(budgets []Budget, amount int64) (*Hold, *Refusal) {
	amount = max(amount, 0)
	budgets = budgets[:min(len(budgets), maxBudgets)]
	now := l.now()
	h := &Hold{l: l, amount: amount}
	l.mu.Lock()
	defer l.mu.Unlock()
	day, month := l.days.at(now)
	for _, b := range budgets {
		d := l.get(day, b.Scope)
		if over(d, b.PerDay, amount) {
			return nil, &Refusal{b.Scope, "day", d.charged() < b.PerDay}
		}
		h.totals[h.n] = d
		h.n++
		if b.DayOnly {
			continue
		}
		m := l.get(month, b.Scope)
		if over(m, b.PerMonth, amount) {
			return nil, &Refusal{b.Scope, "month", m.charged() < b.PerMonth}
		}
		h.totals[h.n] = m
		h.n++
	}
	for _, t := range h.totals[:h.n] {
		t.reserved += amount
	}
	return h, nil
}

// over reports whether reserving amount more would overrun limit (0: none). What is
// charged and reserved plus the call's whole upper bound must fit: a call that may cost more
// than the whole budget never fits, since admitting it could overrun the budget by its cost.
func over(t *total, limit, amount int64) bool {
	return limit > 0 && (t.charged() >= limit || t.charged()+t.reserved+amount > limit)
}

// Left is the most a call may still reserve against budgets now: what is left of the
// tightest of their limits, after what is charged and reserved (0 when one is spent). It is
// -1 when none of them is limited. Reserve still decides: another call may take the room
// first.
func (l *Ledger) Left(budgets []Budget) int64 {
	budgets = budgets[:min(len(budgets), maxBudgets)]
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	day, month := l.days.at(now)
	left := int64(-1)
	room := func(t *total, limit int64) {
		if limit <= 0 {
			return
		}
		r := max(limit-t.charged()-t.reserved, 0)
		if left < 0 || r < left {
			left = r
		}
	}
	for _, b := range budgets {
		room(l.get(day, b.Scope), b.PerDay)
		if !b.DayOnly {
			room(l.get(month, b.Scope), b.PerMonth)
		}
	}
	return left
}

// Settle replaces the reservation with what the call really cost.
func (h *Hold) Settle(cost int64) {
	if h == nil || h.done {
		return
	}
	h.done = true
	cost = max(cost, 0)
	h.l.mu.Lock()
	for _, t := range h.totals[:h.n] {
		t.reserved -= h.amount
		t.pending += cost
	}
	h.l.mu.Unlock()
}

// Charge adds cost to the scopes' spend without a reservation: for a call whose route
// reserved nothing.
func (l *Ledger) Charge(scopes []string, cost int64) {
	b := make([]Budget, 0, 2)
	for _, s := range scopes {
		if s != "" {
			b = append(b, Budget{Scope: s})
		}
	}
	h, _ := l.Reserve(b, 0) // no limits: never refused
	h.Settle(cost)
}

// ChargeDay adds cost to a day-only scope's spend (an end user's) without a reservation.
func (l *Ledger) ChargeDay(scope string, cost int64) {
	if scope == "" {
		return
	}
	h, _ := l.Reserve([]Budget{{Scope: scope, DayOnly: true}}, 0) // no limits: never refused
	h.Settle(cost)
}

// Cancel drops the reservation of a call that was refused elsewhere or never ran.
func (h *Hold) Cancel() { h.Settle(0) }

// Spent reports a scope's spend this UTC day and month, in currency, reservations left out.
func (l *Ledger) Spent(scope string) (day, month float64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	dk, mk := l.days.at(now)
	var d, m int64
	if t := l.totals[periodScope{dk, scope}]; t != nil {
		d = t.charged()
	}
	if t := l.totals[periodScope{mk, scope}]; t != nil {
		m = t.charged()
	}
	return Amount(d), Amount(m)
}

// Run flushes and syncs every interval until ctx ends, then flushes a last time.
func (l *Ledger) Run(ctx context.Context, every time.Duration) {
	if l.st == nil {
		return
	}
	flushEvery(ctx, every, l.log, "spend", l.flush, func(ctx context.Context) {
		if err := l.sync(ctx); err != nil {
			l.log.Warn("spend: sync failed", "err", err.Error())
		}
	})
}

// Flush writes what this replica charged since the last flush.
func (l *Ledger) Flush(ctx context.Context) error { return l.flush(ctx) }

func (l *Ledger) flush(ctx context.Context) error {
	if l.st == nil {
		return nil
	}
	type dirty struct {
		k periodScope
		t *total // never dropped by sync while it is flushing
		n int64
	}
	l.mu.Lock()
	var out []dirty
	for k, t := range l.totals {
		if t.pending != 0 {
			out = append(out, dirty{k, t, t.pending})
			t.flushing += t.pending
			t.pending = 0
		}
	}
	l.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	// In key order: bbolt inserts into a leaf kept in memory until the commit splits it, so
	// keys in map order (new end users' among them) each shifted the ones after them, a
	// cost that grows with the square of the batch: 50,000 totals took seconds, sorted a
	// fraction of one.
	slices.SortFunc(out, func(a, b dirty) int {
		return cmp.Or(strings.Compare(a.k.period, b.k.period), strings.Compare(a.k.scope, b.k.scope))
	})
	// Every dirty total in one batch: one transaction (one sync to disk) on bbolt, one
	// pipeline on Redis. Written one Add each, 40,000 end users' totals took longer than
	// the flush interval to write, so a kill lost most of a day's spend, the team's total
	// included when its turn came late, and a shutdown's last flush outlasted the drain.
	err := l.st.Batch(ctx, func(tx store.Tx) error {
		for _, d := range out {
			ttl := 40 * 24 * time.Hour
			if strings.HasPrefix(d.k.period, "m") {
				ttl = 400 * 24 * time.Hour
			}
			if err := tx.Add(spendBucket, d.k.storeKey(), map[string]int64{"micros": d.n}, ttl); err != nil {
				return err
			}
		}
		return nil
	})
	l.health.Wrote(store.WriterLedger, err)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range out {
		d.t.flushing -= d.n
		if err != nil {
			// Kept for the next flush. On bbolt the batch was undone whole; on Redis a
			// failed pipeline may have applied part of it, which the next flush adds
			// again: spend is then counted high, never lost.
			d.t.pending += d.n
		} else {
			d.t.base += d.n
		}
	}
	return err
}

// sync reads the current day's and month's totals back from the store, so spend charged by
// other replicas counts here too, and forgets totals of periods that are over.
func (l *Ledger) sync(ctx context.Context) error {
	if l.st == nil {
		return nil
	}
	now := l.now()
	day, month := dayKey(now), monthKey(now)
	stored := map[periodScope]int64{}
	for _, prefix := range []string{day + "|", month + "|"} {
		err := l.st.ScanCounters(ctx, spendBucket, prefix, func(key string, c map[string]int64) error {
			p, s, _ := strings.Cut(key, "|")
			stored[periodScope{p, s}] = c["micros"]
			return nil
		})
		if err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range stored {
		t := l.totals[k]
		if t == nil {
			t = &total{}
			l.totals[k] = t
		}
		t.base = n
	}
	for k, t := range l.totals {
		if k.period != day && k.period != month && t.pending == 0 && t.flushing == 0 && t.reserved == 0 {
			delete(l.totals, k)
		}
	}
	return nil
}

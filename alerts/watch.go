package alerts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"modelgate/config"
	"modelgate/periodic"
	"modelgate/store"
)

// Buckets of the store this package owns.
const (
	// claimsBucket holds one record per announced occurrence, created only if absent: the
	// replica whose Create wins sends the event. Budget claims are keyed
	// "<d20261126|m202611>|<scope id>|<budget>|<threshold>", key expiries "expired|<id>";
	// the value is the event.
	claimsBucket = "alert_claims"
	// expiriesBucket holds the issued keys whose expiry is still to be announced: id ->
	// pendingExpiry. It outlives the key's own record, which the store drops at expiry.
	expiriesBucket = "alert_key_expiries"
)

// How long claims are kept: past the end of their period, so a late replica cannot claim
// again, and then forgotten.
const (
	dayClaimTTL    = 3 * 24 * time.Hour
	monthClaimTTL  = 40 * 24 * time.Hour
	expiryClaimTTL = 30 * 24 * time.Hour
)

// Reading is one budget of one scope and what is used of it now, as the shared figures say.
type Reading struct {
	Scope    string // "team" or "key"
	Team     string
	Key      string  // the key's name, for a key scope
	Budget   string  // BudgetSpendDay, BudgetSpendMonth or BudgetTokensDay
	Used     float64 // currency or tokens
	Limit    float64 // > 0
	Currency string  // spend budgets
}

// scopeID is the limiter's name of the reading's scope.
func (r Reading) scopeID() string {
	if r.Scope == "key" {
		return "key:" + r.Team + "/" + r.Key
	}
	return "team:" + r.Team
}

// IssuedKey is what the Watcher needs of an issued key to announce its expiry.
type IssuedKey struct {
	ID, Team, Name string
	ExpiresAt      time.Time // zero: never
}

// Options build a Watcher.
type Options struct {
	Store  store.Store // required: claims live there
	Sender *Sender     // required
	// Readings returns every limited budget with its use now. It runs on the Watcher's loop,
	// never on a request; a reading that cannot be had is left out.
	Readings func(ctx context.Context) []Reading
	// IssuedKeys lists the issued keys live now, so expiries of keys issued before this
	// replica started are announced too; nil: only keys the Watcher heard issued.
	IssuedKeys func() []IssuedKey
	Now        func() time.Time
	Log        *slog.Logger
}

// Watcher compares budgets with their thresholds and announces issued keys' lifecycle.
type Watcher struct {
	o Options
	// trackMu guards tracked: the issued keys whose expiry this process has already written
	// to the store. Check normally runs on the loop alone, but may be called from anywhere.
	trackMu sync.Mutex
	tracked map[string]bool
	// claimed are the budget claims this process knows are taken (by it or another replica)
	// on day claimedDay, so a budget that stays past a threshold costs one store write per
	// threshold and process a day, not one per check. Guarded by claimMu.
	claimMu    sync.Mutex
	claimed    map[string]bool
	claimedDay string
	// refused are the budgets ("<scope id>|<budget>") that refused a call since the last
	// check, noted by the request path (Exhausted) and read by the next check. Bounded by
	// maxRefused; guarded by refusedMu, which the request path holds for a map write only.
	refusedMu sync.Mutex
	refused   map[string]bool
}

// maxRefused bounds the budgets noted between two checks; past it, notes wait for the next
// refusal after the check.
const maxRefused = 4096

// NewWatcher builds a Watcher; Run starts its loop.
func NewWatcher(o Options) (*Watcher, error) {
	if o.Store == nil || o.Sender == nil {
		return nil, errors.New("alerts: a store and a sender are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Readings == nil {
		o.Readings = func(context.Context) []Reading { return nil }
	}
	o.Store.Unversioned(claimsBucket, expiriesBucket)
	return &Watcher{o: o, tracked: map[string]bool{}, claimed: map[string]bool{}, refused: map[string]bool{}}, nil
}

// Exhausted notes that the budget of scope (the limiter's scope id, "team:search" or
// "key:search/prod") refused a call: its next check announces every threshold up to 100%
// as crossed, even when the settled use is short of it. Budgets refuse calls before their use
// reaches the limit (a call's reservation must fit), so without this a budget could be spent
// for every caller and never announce 100%. It runs on the request path: one map write.
func (w *Watcher) Exhausted(scope, budget string) {
	w.refusedMu.Lock()
	defer w.refusedMu.Unlock()
	if len(w.refused) < maxRefused {
		w.refused[scope+"|"+budget] = true
	}
}

// takeRefused returns the budgets noted since the last check and starts a new set.
func (w *Watcher) takeRefused() map[string]bool {
	w.refusedMu.Lock()
	defer w.refusedMu.Unlock()
	if len(w.refused) == 0 {
		return nil // never the live set, which the request path goes on writing
	}
	taken := w.refused
	w.refused = map[string]bool{}
	return taken
}

// Run checks every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context, every time.Duration) {
	periodic.Every(ctx, every, func(ctx context.Context) {
		if err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.o.Log.Warn("alerts: check failed; retried on the next tick", "err", err.Error())
		}
	})
}

// Check runs one round: budget thresholds, then key expiries.
func (w *Watcher) Check(ctx context.Context) error {
	return errors.Join(w.checkBudgets(ctx), w.checkExpiries(ctx))
}

// checkBudgets claims and announces every threshold crossed and not yet claimed. A reading
// past several thresholds at once announces each of them, lowest first.
func (w *Watcher) checkBudgets(ctx context.Context) error {
	now := w.o.Now().UTC()
	w.claimMu.Lock()
	defer w.claimMu.Unlock()
	if day := now.Format("20060102"); day != w.claimedDay {
		w.claimed, w.claimedDay = map[string]bool{}, day // the day's and month's claims are learned again
	}
	var errs []error
	refused := w.takeRefused()
	for _, r := range w.o.Readings(ctx) {
		if r.Limit <= 0 {
			continue
		}
		wasRefused := refused[r.scopeID()+"|"+r.Budget]
		periodKey, period, ttl := "d"+now.Format("20060102"), now.Format("2006-01-02"), dayClaimTTL
		if r.Budget == BudgetSpendMonth {
			periodKey, period, ttl = "m"+now.Format("200601"), now.Format("2006-01"), monthClaimTTL
		}
		for _, th := range Thresholds {
			short := r.Used*100 < r.Limit*float64(th)
			if short && !wasRefused {
				break
			}
			claim := periodKey + "|" + r.scopeID() + "|" + r.Budget + "|" + strconv.Itoa(th)
			if w.claimed[claim] {
				continue
			}
			ev := Event{ID: eventID(claim), Type: config.EventBudgetThreshold, Time: now,
				Scope: r.Scope, Team: r.Team, Key: r.Key, Budget: r.Budget, Period: period,
				Threshold: th, Used: r.Used, Limit: r.Limit, Currency: r.Currency, Refused: short}
			if err := w.claimAndSend(ctx, claim, ev, ttl); err != nil {
				errs = append(errs, err)
				break // the store is failing: the next tick tries again
			}
			w.claimed[claim] = true
		}
	}
	return errors.Join(errs...)
}

// claimAndSend sends ev if this call is the one that creates its claim. The claim is taken
// before the delivery and kept whatever becomes of it: at most once, never twice.
func (w *Watcher) claimAndSend(ctx context.Context, claim string, ev Event, ttl time.Duration) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	won, err := w.o.Store.Create(ctx, claimsBucket, claim, body, ttl)
	if err != nil || !won {
		return err
	}
	w.o.Sender.Send(ev)
	return nil
}

// Deliveries counts the Sender's deliveries so far.
func (w *Watcher) Deliveries() Stats { return w.o.Sender.Stats() }

// CrossedToday lists the budget thresholds claimed today (UTC), by any replica, in the
// order they were crossed: the day's budgets and the month's crossed today.
func (w *Watcher) CrossedToday(ctx context.Context) ([]Event, error) {
	now := w.o.Now().UTC()
	today := now.Format("2006-01-02")
	var out []Event
	for _, prefix := range []string{"d" + now.Format("20060102") + "|", "m" + now.Format("200601") + "|"} {
		err := w.o.Store.Scan(ctx, claimsBucket, prefix, func(_ string, v []byte) error {
			var ev Event
			if json.Unmarshal(v, &ev) == nil && ev.Time.UTC().Format("2006-01-02") == today {
				out = append(out, ev)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Team, b.Team), cmp.Compare(a.Key, b.Key),
			cmp.Compare(a.Budget, b.Budget), cmp.Compare(a.Threshold, b.Threshold))
	})
	return out, nil
}

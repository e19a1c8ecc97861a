// Package breaker holds modelgate's circuit breakers: one per upstream model and one per
// platform key (upstream.ModelBreaker, upstream.KeyBreaker). A breaker opens after a number
// of failures within a window, stays open for a cool-down, then lets exactly one probe
// through; the probe's success closes it, its failure opens it again for twice as long (up
// to a cap).
//
// A Set implements upstream.Health. Asking a closed breaker costs a map read and an atomic
// load, with no I/O: the request path stays local. Only failures, openings, probes and
// closings reach the store, and each replica refreshes its view of the others' breakers on
// a loop (Run), so replicas on Redis share open breakers and one probe between them.
package breaker

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/store"
)

// State is where a breaker is; the numbers are the metric's values.
type State int32

const (
	Closed   State = 0 // calls go through
	HalfOpen State = 1 // the cool-down is over: one probe may go
	Open     State = 2 // calls fail fast until the cool-down ends
)

func (s State) String() string {
	switch s {
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "closed"
}

// Settings are upstream.breaker's values after defaults.
type Settings struct {
	Failures    int           // failures within Window that open a breaker; 0 turns breakers off
	Window      time.Duration // the window failures are counted in
	Cooldown    time.Duration // how long a breaker stays open before its first probe
	MaxCooldown time.Duration // the cap on the cool-down, which doubles per failed probe
}

const (
	// MaxBreakers caps the breakers of one process. Names come from the config (models, key
	// fingerprints), so the cap is never reached in practice; past it a name gets no breaker
	// and is always allowed, rather than memory growing with names.
	MaxBreakers = 4096
	// probeLease is how long a probe holds its claim. A probe that never reports (its
	// client left, the process died) frees the breaker for another probe after this.
	probeLease = 30 * time.Second
	// recheck is how long an open breaker this replica did not trip waits before it asks
	// the store again whether its cool-down is over: at most one store call per breaker per
	// recheck, and only while requests ask for it.
	recheck = time.Second
	// storeTimeout bounds one store call made on a failure or a probe.
	storeTimeout = 2 * time.Second
)

// Options build a Set.
type Options struct {
	Settings
	// Store shares the breakers between replicas; nil keeps them in this process.
	Store store.Store
	Now   func() time.Time // nil: time.Now
	Log   *slog.Logger     // nil: silent
}

// Set is the breakers of one process. Its zero value is not usable; a nil *Set allows
// everything.
type Set struct {
	cfg Settings
	st  store.Store
	now func() time.Time
	log *slog.Logger

	// breakers is copied on write: names are created rarely (a first failure), and reads
	// on the request path then take no lock.
	breakers atomic.Pointer[map[string]*breaker]
	mu       sync.Mutex // serialises creating names and the fields below
	// transitions numbers this replica's own openings and closings (breaker.changed).
	transitions atomic.Uint64
	version     uint64 // the state bucket's version last loaded
	loaded      bool
}

// breaker is one name's local view.
type breaker struct {
	state atomic.Int32 // Closed lets Allow answer without the lock

	mu       sync.Mutex
	failures int       // failures counted in the current window (the shared count with a store)
	window   int64     // the window failures counts belong to
	openedAt time.Time // when it last opened, for display (another replica's clock when learned)
	// openedBy and openedAfter say what last opened it, for display: an open breaker's
	// window count starts again at 0, and "0 failures" would hide why it is open.
	openedBy    string
	openedAfter int
	// changed is the set's transition number when this replica last opened or closed b:
	// a sync that began before it must not undo it with what it read.
	changed  uint64
	until    time.Time // open: when to ask (or, alone, to allow) a probe
	cooldown time.Duration
	probing  bool      // this replica holds the probe
	probeEnd time.Time // when the probe's lease ends
}

// New builds a Set. With Failures 0 every call is allowed and nothing is counted.
func New(o Options) *Set {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxCooldown < o.Cooldown {
		o.MaxCooldown = o.Cooldown
	}
	s := &Set{cfg: o.Settings, st: o.Store, now: o.Now, log: o.Log}
	s.breakers.Store(&map[string]*breaker{})
	if s.st != nil {
		s.st.Unversioned(failBucket, probeBucket)
	}
	return s
}

// Enabled reports whether breakers count anything.
func (s *Set) Enabled() bool { return s != nil && s.cfg.Failures > 0 }

// get returns name's breaker, creating it when create is set and the cap allows.
func (s *Set) get(name string, create bool) *breaker {
	b := (*s.breakers.Load())[name]
	if b != nil || !create {
		return b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.breakers.Load()
	if b = old[name]; b != nil || len(old) >= MaxBreakers {
		return b
	}
	b = &breaker{cooldown: s.cfg.Cooldown}
	m := make(map[string]*breaker, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = b
	s.breakers.Store(&m)
	return b
}

// all is every breaker now.
func (s *Set) all() map[string]*breaker { return *s.breakers.Load() }

// Allow implements upstream.Health: true while closed; while open, false until the
// cool-down ends, then true for one probe at a time (across replicas with a store).
func (s *Set) Allow(name string) bool {
	if !s.Enabled() {
		return true
	}
	b := s.get(name, false)
	if b == nil || State(b.state.Load()) == Closed {
		return true
	}
	// Someone else is deciding for this breaker right now: the answer for every other
	// caller is no, which keeps the probe single without waiting for the lock.
	if !b.mu.TryLock() {
		return false
	}
	defer b.mu.Unlock()
	now := s.now()
	switch {
	case State(b.state.Load()) == Closed:
		return true
	case b.probing && now.Before(b.probeEnd):
		return false
	case now.Before(b.until):
		return false
	}
	b.probing = false
	if s.st != nil {
		won, err := s.claimProbe(name)
		if err != nil {
			s.log.Warn("breaker: store unreachable; probing from this replica alone", "breaker", name, "err", err.Error())
		} else if !won {
			// The cool-down is not over at the store, or another replica probes.
			b.until = now.Add(recheck)
			return false
		}
	}
	b.state.Store(int32(HalfOpen))
	b.probing, b.probeEnd = true, now.Add(probeLease)
	return true
}

// Report implements upstream.Health: a failure counts towards opening a closed breaker, and
// the probe's outcome closes or re-opens a half-open one. Outcomes of calls let through
// before the breaker opened do not move it.
func (s *Set) Report(name string, failed bool) {
	if !s.Enabled() {
		return
	}
	b := s.get(name, failed)
	if b == nil || (!failed && State(b.state.Load()) == Closed) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := s.now()
	switch {
	case b.probing && failed:
		b.cooldown = min(2*b.cooldown, s.cfg.MaxCooldown)
		b.openedBy, b.openedAfter = OpenedByProbe, 1
		s.open(name, b, now, true)
	case b.probing:
		s.close(name, b)
	case failed && State(b.state.Load()) == Closed:
		if n, shared := s.count(name, b, now); n >= s.cfg.Failures {
			b.cooldown = s.cfg.Cooldown
			b.openedBy, b.openedAfter = OpenedByFailures, n
			// Of the replicas counting at once, the one whose failure reached the
			// threshold writes the opening; the others (past it) open here only, and
			// leave alone the claim a probe of another replica may already hold.
			s.open(name, b, now, !shared || n == s.cfg.Failures)
		}
	}
}

// open opens b for its cool-down, here and, when publish is set, at the store. The caller
// holds b.mu.
func (s *Set) open(name string, b *breaker, now time.Time, publish bool) {
	b.state.Store(int32(Open))
	b.probing = false
	b.openedAt, b.until = now, now.Add(b.cooldown)
	b.changed = s.transitions.Add(1)
	if s.st != nil && publish {
		if err := s.publishOpen(name, b.cooldown); err != nil {
			s.log.Warn("breaker: could not share an opened breaker", "breaker", name, "err", err.Error())
		}
	}
	s.log.Warn("circuit breaker opened", "breaker", name, "cooldown", b.cooldown.String())
}

// close closes b after a successful probe. The caller holds b.mu.
func (s *Set) close(name string, b *breaker) {
	b.state.Store(int32(Closed))
	b.probing = false
	b.failures, b.cooldown = 0, s.cfg.Cooldown
	b.changed = s.transitions.Add(1)
	if s.st != nil {
		if err := s.publishClose(name, b.window); err != nil {
			s.log.Warn("breaker: could not share a closed breaker", "breaker", name, "err", err.Error())
		}
	}
	s.log.Info("circuit breaker closed", "breaker", name)
}

// count adds one failure to the current window and returns the window's count: the
// replicas' shared count with a store (shared), this replica's own without one or when
// the store fails.
func (s *Set) count(name string, b *breaker, now time.Time) (n int, shared bool) {
	w := now.UnixNano() / int64(s.cfg.Window)
	if w != b.window {
		b.window, b.failures = w, 0
	}
	b.failures++
	if s.st != nil {
		total, err := s.addFailure(name, w)
		if err == nil {
			b.failures = int(total)
			return b.failures, true
		}
		s.log.Warn("breaker: could not share a failure; counting locally", "breaker", name, "err", err.Error())
	}
	return b.failures, false
}

// Status is one breaker as /admin/usage and the dashboard show it.
type Status struct {
	Name     string     `json:"name"`
	State    string     `json:"state"`
	Failures int        `json:"failures"`            // in the current window
	OpenedAt *time.Time `json:"opened_at,omitempty"` // when it last opened; nil if it never did
	// OpenedBy says what last opened it (OpenedByFailures, OpenedByProbe, OpenedByReplica);
	// OpenedAfter, for OpenedByFailures, how many failures in one window did.
	OpenedBy    string `json:"opened_by,omitempty"`
	OpenedAfter int    `json:"opened_after_failures,omitempty"`
	value       State
}

// What opened a breaker, as Status.OpenedBy tells it.
const (
	OpenedByFailures = "failures"      // Settings.Failures failures within one window
	OpenedByProbe    = "failed_probe"  // the half-open probe failed: open again, longer
	OpenedByReplica  = "other_replica" // learned from the store: another replica opened it
)

// Value is the state as the metric's number.
func (st Status) Value() State { return st.value }

// Statuses reports every breaker, sorted by name.
func (s *Set) Statuses() []Status {
	out := []Status{}
	if s == nil {
		return out
	}
	now := s.now()
	for name, b := range s.all() {
		b.mu.Lock()
		// Half-open is shown while a probe is out; an open breaker whose cool-down ended
		// stays open until a call comes to probe it.
		st := State(b.state.Load())
		failures := b.failures
		if b.window != now.UnixNano()/int64(max(s.cfg.Window, 1)) {
			failures = 0
		}
		item := Status{Name: name, State: st.String(), Failures: failures, value: st}
		if !b.openedAt.IsZero() {
			at := b.openedAt
			item.OpenedAt = &at
			item.OpenedBy, item.OpenedAfter = b.openedBy, b.openedAfter
		}
		b.mu.Unlock()
		out = append(out, item)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// OpenCount is how many breakers are not closed, for /readyz's details.
func (s *Set) OpenCount() int {
	n := 0
	for _, st := range s.Statuses() {
		if st.value != Closed {
			n++
		}
	}
	return n
}

func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, storeTimeout)
}

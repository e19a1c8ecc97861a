package breaker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"modelgate/periodic"
	"modelgate/store"
)

// The store's records. Every time in them is a TTL worked out on the injected clock, never
// an instant another replica compares with its own clock (docs/architecture.md, "Time");
// the one instant kept, when a breaker opened, is only shown.
const (
	// stateBucket holds one record per tripped breaker (open or half-open): "<cooldown ms>
	// <opened at, unix ms>". Its version tells replicas when to reload it; a breaker with no
	// record is closed.
	stateBucket = "breaker_state"
	// probeBucket holds a breaker's turn to probe: "cooling" for the cool-down (the record's
	// TTL), then "probe" for the lease of the replica whose Create won. Create succeeds only
	// once neither is live, which makes the cool-down's end and the single probe one test.
	probeBucket = "breaker_probe"
	// failBucket counts failures per breaker and window: "<name>|<window>" -> n.
	failBucket = "breaker_fail"
)

func failKey(name string, window int64) string {
	return name + "|" + strconv.FormatInt(window, 10)
}

func (s *Set) addFailure(name string, window int64) (int64, error) {
	ctx, cancel := bounded(context.Background())
	defer cancel()
	return s.st.Incr(ctx, failBucket, failKey(name, window), "n", 1, 2*s.cfg.Window)
}

func (s *Set) claimProbe(name string) (bool, error) {
	ctx, cancel := bounded(context.Background())
	defer cancel()
	return s.st.Create(ctx, probeBucket, name, []byte("probe"), probeLease)
}

func (s *Set) publishOpen(name string, cooldown time.Duration) error {
	ctx, cancel := bounded(context.Background())
	defer cancel()
	rec := strconv.FormatInt(cooldown.Milliseconds(), 10) + " " + strconv.FormatInt(s.now().UnixMilli(), 10)
	return s.st.Batch(ctx, func(tx store.Tx) error {
		if err := tx.Put(probeBucket, name, []byte("cooling"), cooldown); err != nil {
			return err
		}
		return tx.Put(stateBucket, name, []byte(rec), 0)
	})
}

// publishClose removes the breaker's records and its window's failures, so the failures
// that opened it do not open it again at once.
func (s *Set) publishClose(name string, window int64) error {
	ctx, cancel := bounded(context.Background())
	defer cancel()
	return s.st.Batch(ctx, func(tx store.Tx) error {
		if _, err := tx.Delete(stateBucket, name); err != nil {
			return err
		}
		if err := tx.Remove(probeBucket, name); err != nil {
			return err
		}
		return tx.Remove(failBucket, failKey(name, window))
	})
}

// parseRecord reads a state record; ok is false for one this package did not write.
func parseRecord(v []byte) (cooldown time.Duration, openedAt time.Time, ok bool) {
	a, b, found := strings.Cut(string(v), " ")
	if !found || len(a) > 12 || len(b) > 16 {
		return 0, time.Time{}, false
	}
	ms, err1 := strconv.ParseInt(a, 10, 64)
	at, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || ms <= 0 {
		return 0, time.Time{}, false
	}
	return time.Duration(ms) * time.Millisecond, time.UnixMilli(at), true
}

// Sync loads the other replicas' breakers when the state bucket changed: a breaker tripped
// elsewhere opens here (the store then says when its probe may go), and one closed
// elsewhere closes here. Without a store it does nothing.
func (s *Set) Sync(ctx context.Context) error {
	if s.st == nil || !s.Enabled() {
		return nil
	}
	began, seq := s.now(), s.transitions.Load()
	v, err := s.st.Version(ctx, stateBucket)
	if err != nil {
		return err
	}
	s.mu.Lock()
	same := s.loaded && v == s.version
	s.mu.Unlock()
	if same {
		return nil
	}
	type tripped struct {
		cooldown time.Duration
		openedAt time.Time
	}
	seen := map[string]tripped{}
	err = s.st.Scan(ctx, stateBucket, "", func(name string, value []byte) error {
		if cd, at, ok := parseRecord(value); ok && len(seen) < MaxBreakers {
			seen[name] = tripped{cd, at}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for name, t := range seen {
		b := s.get(name, true)
		if b == nil {
			continue
		}
		b.mu.Lock()
		if State(b.state.Load()) == Closed && b.changed <= seq {
			b.state.Store(int32(Open))
			// Ask the store at the next call: its cooling record says whether the
			// cool-down is over.
			b.until, b.openedAt, b.cooldown = began, t.openedAt, t.cooldown
			b.openedBy, b.openedAfter = OpenedByReplica, 0
		}
		b.mu.Unlock()
	}
	s.mu.Lock()
	s.version, s.loaded = v, true
	s.mu.Unlock()
	for name, b := range s.all() {
		if _, ok := seen[name]; ok {
			continue
		}
		b.mu.Lock()
		// Closed elsewhere, unless it opened here after this sync began (its record may
		// not have been written when the scan ran) or this replica probes it.
		if State(b.state.Load()) != Closed && !b.probing && b.changed <= seq {
			b.state.Store(int32(Closed))
			b.failures, b.cooldown = 0, s.cfg.Cooldown
		}
		b.mu.Unlock()
	}
	return nil
}

// Run syncs every interval (a second when not positive) until ctx ends. Without a store
// it returns at once.
func (s *Set) Run(ctx context.Context, every time.Duration) {
	if s == nil || s.st == nil || !s.Enabled() {
		return
	}
	if every <= 0 {
		every = time.Second
	}
	if err := s.Sync(ctx); err != nil {
		s.log.Warn("breaker: could not load the shared breakers; using this replica's view", "err", err.Error())
	}
	periodic.Every(ctx, every, func(ctx context.Context) {
		if err := s.Sync(ctx); err != nil {
			s.log.Warn("breaker: sync failed; will retry", "err", err.Error())
		}
	})
}

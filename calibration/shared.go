package calibration

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"modelgate/periodic"
)

const (
	// bucket holds one counter record per slot, team and model: "<slot>|<team>|<model>"
	// with counters n, r and r2. (The bucket "calibration" before it held one per slot and
	// model, shared by every team; its records expire on their own.)
	bucket = "calibration_teams"
	// slotLength is the time one record collects samples for.
	slotLength = 6 * time.Hour
	// keptSlots is how many slots before the current one count; older records are ignored
	// and expire.
	keptSlots = 12
	// halfLifeSlots is the age, in slots, at which a slot's weight has halved (12 hours).
	halfLifeSlots = 2
)

// slotOf numbers the slot t falls in.
func slotOf(t time.Time) int64 { return t.Unix() / int64(slotLength/time.Second) }

// slotWeight is the weight of a slot age slots old. A slot stamped ahead of this replica's
// clock (another replica's clock runs ahead) counts as the current one.
func slotWeight(age int64) float64 {
	return math.Exp2(-float64(max(age, 0)) / halfLifeSlots)
}

func recordKey(slot int64, team, model string) string {
	return strconv.FormatInt(slot, 10) + "|" + team + "|" + model
}

// parseKey reads a record key back; ok is false for a key this package did not write. The
// team holds no '|' (validTeam), so the model is everything after the second one.
func parseKey(key string) (slot int64, team, model string, ok bool) {
	s, rest, found := strings.Cut(key, "|")
	if !found || s == "" || len(s) > 12 {
		return 0, "", "", false
	}
	team, model, found = strings.Cut(rest, "|")
	if !found || !validTeam(team) || model == "" || len(model) > MaxModelLen {
		return 0, "", "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, "", "", false
		}
	}
	slot, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, "", "", false
	}
	return slot, team, model, true
}

// Run loads the shared view, then every interval (10s when not positive) writes this
// replica's samples and reloads it, until ctx ends; then it writes what is pending a last
// time. Without a store it returns at once.
func (t *Table) Run(ctx context.Context, every time.Duration) {
	if t.st == nil {
		return
	}
	if every <= 0 {
		every = 10 * time.Second
	}
	if err := t.Sync(ctx); err != nil {
		t.log.Warn("calibration: could not load the shared view; using local samples until the store answers", "err", err.Error())
	}
	periodic.Every(ctx, every, func(ctx context.Context) {
		if err := t.Sync(ctx); err != nil {
			t.log.Warn("calibration: sync failed; will retry", "err", err.Error())
		}
	})
	if err := t.Flush(context.Background()); err != nil {
		t.log.Warn("calibration: final flush failed", "err", err.Error())
	}
}

// Sync writes this replica's pending samples, then reloads the shared view. A failed write
// keeps its samples for the next one; the reload runs anyway.
func (t *Table) Sync(ctx context.Context) error {
	if t.st == nil {
		return nil
	}
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	return errors.Join(t.flush(ctx), t.reload(ctx))
}

// Flush writes the samples observed here since the last flush (also called on shutdown).
func (t *Table) Flush(ctx context.Context) error {
	if t.st == nil {
		return nil
	}
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	return t.flush(ctx)
}

// outgoing is one team's samples of one model on their way to the store.
type outgoing struct {
	team, model string
	m           *model
	e           *entry
	s           sums
}

// flush moves each entry's pending samples to unsynced, where they keep counting, writes
// them, and moves them back to pending when the write fails. t.syncMu is held.
func (t *Table) flush(ctx context.Context) error {
	var out []outgoing
	t.mu.RLock()
	for name, m := range t.models {
		m.mu.Lock()
		for team, e := range m.teams {
			if e.pending.n > 0 {
				out = append(out, outgoing{team, name, m, e, e.pending})
				e.unsynced.add(e.pending)
				e.pending = sums{}
			}
		}
		m.mu.Unlock()
	}
	t.mu.RUnlock()
	if len(out) == 0 {
		return nil
	}
	now := t.now()
	slot := slotOf(now)
	// The record outlives its slot by the kept slots; a TTL, not an instant, crosses to the
	// store's clock.
	ttl := time.Unix((slot+1+keptSlots)*int64(slotLength/time.Second), 0).Sub(now)
	var errs []error
	for _, o := range out {
		err := t.st.Add(ctx, bucket, recordKey(slot, o.team, o.model),
			map[string]int64{"n": o.s.n, "r": o.s.r, "r2": o.s.r2}, ttl)
		if err != nil {
			o.m.mu.Lock()
			o.e.unsynced.sub(o.s)
			o.e.pending.add(o.s)
			o.m.mu.Unlock()
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// read is what a reload found of one model: each team's view, and their total weight.
type read struct {
	teams map[string]*view
	w     float64
}

// reload reads the shared records into each entry's shared view. Models and teams the store
// knows and this table does not are taken in while there is room, the most weighted models
// first; an entry with no samples left anywhere is dropped, and a model with no entry left,
// so their places can be taken. t.syncMu is held, so every flush that moved samples to
// unsynced has finished: the store holds them.
func (t *Table) reload(ctx context.Context) error {
	cur := slotOf(t.now())
	found := map[string]*read{}
	err := t.st.ScanCounters(ctx, bucket, "", func(key string, c map[string]int64) error {
		slot, team, name, ok := parseKey(key)
		if !ok || c["n"] <= 0 || cur-slot > keptSlots {
			return nil
		}
		rd := found[name]
		if rd == nil {
			rd = &read{teams: map[string]*view{}}
			found[name] = rd
		}
		v := rd.teams[team]
		if v == nil {
			if len(rd.teams) >= MaxTeams {
				return nil
			}
			v = &view{}
			rd.teams[team] = v
		}
		before := v.w
		v.addSums(sums{n: c["n"], r: c["r"], r2: c["r2"]}, slotWeight(cur-slot))
		rd.w += v.w - before
		return nil
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, m := range t.models {
		m.mu.Lock()
		rd := found[name]
		delete(found, name)
		m.refresh(rd)
		if len(m.teams) == 0 {
			m.gone = true
			delete(t.models, name)
		}
		m.mu.Unlock()
	}
	if room := MaxModels - len(t.models); room > 0 && len(found) > 0 {
		names := make([]string, 0, len(found))
		for name := range found {
			names = append(names, name)
		}
		slices.SortFunc(names, func(a, b string) int {
			if wa, wb := found[a].w, found[b].w; wa != wb {
				if wa > wb {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, name := range names[:min(room, len(names))] {
			m := &model{teams: map[string]*entry{}}
			m.refresh(found[name])
			t.models[name] = m
		}
	}
	return nil
}

// refresh replaces the model's shared views by what a reload read (nil: nothing), takes in
// the teams it read while there is room, and drops the teams with no samples left; m.mu is
// held.
func (m *model) refresh(rd *read) {
	m.ballotOK = false
	for team, e := range m.teams {
		e.shared, e.unsynced = view{}, sums{}
		if rd != nil {
			if v := rd.teams[team]; v != nil {
				e.shared = *v
				delete(rd.teams, team)
			}
		}
		if e.shared.n == 0 && e.pending.n == 0 {
			delete(m.teams, team)
		}
	}
	if rd == nil {
		return
	}
	for team, v := range rd.teams {
		if len(m.teams) >= MaxTeams {
			return
		}
		m.teams[team] = &entry{shared: *v}
	}
}

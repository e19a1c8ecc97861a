package ratelimit

import (
	"testing"
	"time"

	"modelgate/config"
	"modelgate/testclock"
)

// TestRestartKeepsTheDay: Close and New on the same DataPath in the middle of a day keep the
// day's usage and the refusal it implies; the next UTC day starts fresh.
func TestRestartKeepsTheDay(t *testing.T) {
	dir := t.TempDir()
	c := newClock(testclock.NextMidnight(start).Add(-2 * time.Hour)) // 22:00 UTC
	open := func() *Limiter {
		l, err := New(Options{Store: "memory", DataPath: dir, Now: c.Now, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	key := keyScope("r", config.Limits{TokensPerDay: 1000})
	team := teamScope("r", config.Limits{TokensPerDay: 5000})
	req := Request{Key: key, Team: team, Tokens: 100}

	l := open()
	tk, _ := mustAdmit(t, l, req)
	tk.Settle(Usage{InputTokens: 700, OutputTokens: 250})
	if err := l.Close(); err != nil { // the only flush: the interval is an hour
		t.Fatal(err)
	}
	tk.Settle(Usage{InputTokens: 1}) // after Close: ignored, no panic

	l = open()
	_, d := mustAdmit(t, l, req)
	if d.Allowed || d.Reason != ReasonDailyTokens || d.Scope != key.ID || d.RetryAfter != 2*time.Hour {
		t.Fatalf("after restart: %+v", d)
	}
	u := usageOf(t, l, *team)
	if u.DayRequests != 1 || u.DayInputTokens != 700 || u.DayOutputTokens != 250 || u.Remaining["tokens_per_day"] != 4050 {
		t.Fatalf("team after restart: %+v", u)
	}
	c.Advance(2 * time.Hour)
	if _, d := mustAdmit(t, l, req); !d.Allowed {
		t.Fatalf("next day: %+v", d)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// The new day's counters were persisted as well.
	l = open()
	defer l.Close()
	if u := usageOf(t, l, key); u.DayRequests != 1 || u.Remaining["tokens_per_day"] != 900 {
		t.Fatalf("second restart: %+v", u)
	}
}

// TestFlushEvictsIdleScopes: scopes with nothing worth keeping leave memory and come back
// from the data store with their day intact.
func TestFlushEvictsIdleScopes(t *testing.T) {
	c := newClock(testclock.SameDay(start, 2*time.Minute).Add(50 * time.Second)) // hh:mm:50, one day throughout
	l := newLimiter(t, Options{DataPath: t.TempDir(), Now: c.Now, FlushInterval: time.Hour})
	m := l.store.(*memoryStore)
	key := keyScope("e", config.Limits{RequestsPerMinute: 10, TokensPerMinute: 100, TokensPerDay: 1000})
	tk, _ := mustAdmit(t, l, Request{Key: key, Tokens: 10})
	tk.Settle(Usage{InputTokens: 40, OutputTokens: 2})
	count := func() (n int) {
		m.scopes.Range(func(any, any) bool { n++; return true })
		return n
	}
	steps := []struct {
		advance time.Duration
		want    int
	}{
		{0, 1},                // dirty: written, kept
		{0, 1},                // clean, but this minute's counters are live
		{15 * time.Second, 1}, // next minute, but the token bucket refills until 12:01:15.2
		{15 * time.Second, 0}, // full and idle: evicted
	}
	for i, s := range steps {
		c.Advance(s.advance)
		if err := m.flush(); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != s.want {
			t.Fatalf("step %d: %d scopes in memory, want %d", i, got, s.want)
		}
	}
	if u := usageOf(t, l, key); u.DayInputTokens != 40 || u.Remaining["tokens_per_day"] != 958 {
		t.Fatalf("reloaded: %+v", u)
	}
}

// TestEvictionWithoutDataStore: with nothing persisted, a scope that used budget today stays
// in memory (forgetting it would give the budget back) until the day is over.
func TestEvictionWithoutDataStore(t *testing.T) {
	c := newClock(testclock.NextMidnight(start).Add(-12 * time.Hour)) // noon: the day ends 12 h on
	l := newLimiter(t, Options{Now: c.Now, FlushInterval: time.Hour})
	m := l.store.(*memoryStore)
	used := keyScope("used", config.Limits{TokensPerDay: 1000})
	tk, _ := mustAdmit(t, l, Request{Key: used, Tokens: 10})
	tk.Settle(Usage{InputTokens: 10})
	usageOf(t, l, keyScope("quiet", config.Limits{TokensPerDay: 1000})) // looked at, never used
	inMemory := func(id string) bool { _, ok := m.scopes.Load(id); return ok }
	steps := []struct {
		advance             time.Duration
		wantUsed, wantQuiet bool
	}{
		{0, true, true},
		{time.Minute, true, false},
		{12 * time.Hour, false, false},
	}
	for i, s := range steps {
		c.Advance(s.advance)
		if err := m.flush(); err != nil {
			t.Fatal(err)
		}
		if inMemory(used.ID) != s.wantUsed || inMemory("key:t/quiet") != s.wantQuiet {
			t.Fatalf("step %d: used=%v quiet=%v", i, inMemory(used.ID), inMemory("key:t/quiet"))
		}
	}
}

package ratelimit

import (
	"sync"
	"testing"

	"go.uber.org/goleak"

	"modelgate/config"
)

// TestCloseSettlesOpenTicketsAtReservation: a drain that ran out of time closes the limiter
// while handlers still run. Their tickets are settled at their reservation before the store
// closes, so the persisted day holds a bound of what they used rather than nothing; a settle
// that comes after the close is ignored, so each ticket counts exactly once.
func TestCloseSettlesOpenTicketsAtReservation(t *testing.T) {
	type reopen func(t *testing.T) *Limiter
	kinds := []struct {
		name  string
		setup func(t *testing.T, c *clock) (*Limiter, reopen)
	}{
		{"memory", func(t *testing.T, c *clock) (*Limiter, reopen) {
			dir := t.TempDir()
			open := func(t *testing.T) *Limiter { return newLimiter(t, Options{DataPath: dir, Now: c.Now}) }
			return open(t), open
		}},
		{"redis", func(t *testing.T, c *clock) (*Limiter, reopen) {
			url := redisURL(t)
			open := func(t *testing.T) *Limiter { return newLimiter(t, Options{Store: url, Now: c.Now}) }
			return open(t), open
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c := newClock(start)
			l, reopen := k.setup(t, c)
			req := Request{Key: keyScope("d", config.Limits{}), Team: teamScope("d", config.Limits{ConcurrentRequests: 5}),
				Tokens: 100, Input: 10}
			done, _ := mustAdmit(t, l, req)
			running, _ := mustAdmit(t, l, req)
			done.Settle(Usage{InputTokens: 7, OutputTokens: 3})
			if n := l.Open(); n != 1 {
				t.Fatalf("%d open tickets, want 1", n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			running.Settle(Usage{InputTokens: 1, OutputTokens: 1}) // after the close: ignored
			u := usageOf(t, reopen(t), *req.Team)
			if u.DayInputTokens != 7+10 || u.DayOutputTokens != 3+90 || u.DayRequests != 2 {
				t.Errorf("day after close: in=%d out=%d requests=%d, want in=17 out=93 requests=2",
					u.DayInputTokens, u.DayOutputTokens, u.DayRequests)
			}
		})
	}
}

// TestSettlesRacingCloseCountOnce: settles that race Close each count exactly once, either
// with their own usage (they came first) or at their reservation (Close came first).
func TestSettlesRacingCloseCountOnce(t *testing.T) {
	c := newClock(start)
	dir := t.TempDir()
	l := newLimiter(t, Options{DataPath: dir, Now: c.Now})
	team := teamScope("race", config.Limits{})
	req := Request{Key: keyScope("race", config.Limits{}), Team: team, Tokens: 100, Input: 10}
	const n = 50
	tickets := make([]*Ticket, n)
	for i := range tickets {
		tickets[i], _ = mustAdmit(t, l, req)
	}
	var wg sync.WaitGroup
	for _, tk := range tickets {
		wg.Go(func() { tk.Settle(Usage{InputTokens: 1, OutputTokens: 1}) })
	}
	wg.Go(func() { _ = l.Close() })
	wg.Wait()
	u := usageOf(t, newLimiter(t, Options{DataPath: dir, Now: c.Now}), *team)
	// a tickets settled themselves, n-a were settled at their reservation by Close.
	a := (10*n - u.DayInputTokens) / 9
	if a < 0 || a > n || u.DayInputTokens != a+10*(n-a) || u.DayOutputTokens != a+90*(n-a) || u.DayRequests != n {
		t.Errorf("day in=%d out=%d requests=%d: not %d tickets each counted once", u.DayInputTokens, u.DayOutputTokens, u.DayRequests, n)
	}
}

// TestCloseStopsGoroutines: Close ends the flusher and the lease renewer.
func TestCloseStopsGoroutines(t *testing.T) {
	cases := []struct {
		name string
		opts func(t *testing.T) Options
	}{
		{"memory", func(*testing.T) Options { return Options{} }},
		{"memory_data_path", func(t *testing.T) Options { return Options{DataPath: t.TempDir()} }},
		{"redis", func(t *testing.T) Options { return Options{Store: redisURL(t)} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts(t)
			ignore := goleak.IgnoreCurrent()
			l, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

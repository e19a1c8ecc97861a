package ratelimit

import (
	"testing"

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

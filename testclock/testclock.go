// Package testclock gives tests one origin for their clocks, so that a run can be shifted to
// any hour of the UTC day and tests that assume a time of day show themselves.
//
// The origin is the real time now, unless MODELGATE_TEST_CLOCK_ORIGIN names a UTC time of
// day ("13:30"): then it is that time on today's date. Keeping test clocks near the real time
// is not the rule that makes stores safe (see docs/architecture.md, "Time"): product code
// sends stores with clocks of their own relative durations, so any origin works. The variable
// exists to prove that, and .ci/flakes runs the suites at several origins.
package testclock

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// OriginEnv names the variable that shifts every test clock's origin.
const OriginEnv = "MODELGATE_TEST_CLOCK_ORIGIN"

// Origin is the instant test clocks start at. A malformed MODELGATE_TEST_CLOCK_ORIGIN
// panics: a shifted run that silently ran unshifted would prove nothing.
func Origin() time.Time {
	now := time.Now().UTC()
	v := os.Getenv(OriginEnv)
	if v == "" {
		return now
	}
	at, err := time.Parse("15:04", v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: want a UTC time of day as HH:MM", OriginEnv, v))
	}
	day := now.Truncate(24 * time.Hour)
	return day.Add(time.Duration(at.Hour())*time.Hour + time.Duration(at.Minute())*time.Minute)
}

// Running returns a clock that advances with real time from Origin: for tests that run a
// server whose timers are real but whose calendar (daily budgets, history hours) is the
// test clock's.
func Running() func() time.Time {
	offset := Origin().Sub(time.Now())
	return func() time.Time { return time.Now().Add(offset) }
}

// Clock is a settable clock: tests move it instead of sleeping. Its zero value is not
// usable; make one with New or At.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock standing at Origin.
func New() *Clock { return At(Origin()) }

// At returns a Clock standing at t.
func At(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// NextMidnight is the first UTC midnight after t: tests that cross a day boundary on purpose
// start just before it rather than at an hour named on the calendar.
func NextMidnight(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
}

// SameDay returns t, or the instant span before t's next UTC midnight if t+span would cross
// it: for tests that advance their clock by up to span and count on one calendar day, which
// say so by asking for it.
func SameDay(t time.Time, span time.Duration) time.Time {
	if end := NextMidnight(t); !t.Add(span).Before(end) {
		return end.Add(-span - 1).Truncate(time.Minute) // t+span ends before midnight, not at it
	}
	return t
}

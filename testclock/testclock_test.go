package testclock

import (
	"testing"
	"time"
)

func TestOrigin(t *testing.T) {
	t.Setenv(OriginEnv, "")
	if d := time.Since(Origin()); d < 0 || d > time.Minute {
		t.Fatalf("unshifted origin %v from now", d)
	}
	t.Setenv(OriginEnv, "23:59")
	o := Origin()
	if o.Hour() != 23 || o.Minute() != 59 || o.Location() != time.UTC || !o.Truncate(24*time.Hour).Equal(time.Now().UTC().Truncate(24*time.Hour)) {
		t.Fatalf("shifted origin %v, want 23:59 UTC today", o)
	}
	if r := Running()(); r.Sub(o) < 0 || r.Sub(o) > time.Minute {
		t.Fatalf("running clock at %v, origin %v", r, o)
	}
	t.Setenv(OriginEnv, "25:00")
	defer func() {
		if recover() == nil {
			t.Fatal("a malformed origin did not panic")
		}
	}()
	Origin()
}

func TestDayBoundaries(t *testing.T) {
	day := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	next := day.Add(24 * time.Hour)
	cases := []struct {
		at, want time.Time
		span     time.Duration
	}{
		{day.Add(12 * time.Hour), day.Add(12 * time.Hour), time.Hour},                         // room left
		{day.Add(23*time.Hour + 59*time.Minute), next.Add(-3 * time.Minute), 2 * time.Minute}, // moved back
		{day, day, 10 * time.Minute},                                       // a day's start
		{next.Add(-time.Minute), next.Add(-time.Minute), 59 * time.Second}, // just fits
	}
	for _, tc := range cases {
		if got := SameDay(tc.at, tc.span); !got.Equal(tc.want) || !got.Add(tc.span).Before(NextMidnight(got)) {
			t.Errorf("SameDay(%v, %v) = %v, want %v", tc.at, tc.span, got, tc.want)
		}
	}
	if got := NextMidnight(day); !got.Equal(next) {
		t.Errorf("NextMidnight(midnight) = %v, want the next one", got)
	}
	c := At(day)
	c.Advance(time.Hour)
	if !c.Now().Equal(day.Add(time.Hour)) {
		t.Errorf("Advance: %v", c.Now())
	}
	c.Set(next)
	if !c.Now().Equal(next) {
		t.Errorf("Set: %v", c.Now())
	}
}

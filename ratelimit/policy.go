package ratelimit

import (
	"math"
	"time"

	"modelgate/config"
)

// bucket is a token bucket holding up to capacity, refilled at capacity per minute. The Redis
// script implements the same arithmetic (see scripts.go).
type bucket struct {
	level float64
	last  int64 // unix nanoseconds of the last refill
	init  bool
}

// refill brings the bucket to now. A lowered capacity clamps the level; a clock that stepped
// back refills nothing.
func (b *bucket) refill(now int64, capacity int64) {
	c := float64(capacity)
	if !b.init {
		b.level, b.last, b.init = c, now, true
		return
	}
	if now > b.last {
		b.level += float64(now-b.last) * c / float64(time.Minute)
		b.last = now
	}
	if b.level > c {
		b.level = c
	}
}

// add gives tokens back (or takes them when negative), never above capacity.
func (b *bucket) add(n float64, capacity int64) {
	b.level = math.Min(b.level+n, float64(capacity))
}

// full says whether an untouched bucket would be indistinguishable from this one.
func (b *bucket) full(now int64, capacity int64) bool {
	if !b.init || capacity <= 0 {
		return true
	}
	c := float64(capacity)
	return b.level+float64(now-b.last)*c/float64(time.Minute) >= c
}

// waitFor is how long a bucket at level needs to hold need tokens.
func waitFor(level, need float64, capacity int64) time.Duration {
	if level >= need {
		return 0
	}
	// Rounded to the microsecond so float noise cannot push a whole-second wait to the next
	// second once Retry-After rounds up.
	us := math.Round((need - level) * float64(time.Minute/time.Microsecond) / float64(capacity))
	return max(time.Duration(us)*time.Microsecond, time.Microsecond)
}

// tokenNeed is what must be available for a reservation: larger reservations than the whole
// budget only need the budget untouched.
func tokenNeed(reserve, capacity int64) int64 {
	return min(reserve, capacity)
}

// view is one scope's state as admission left it, enough to compute headers.
type view struct {
	rpmLevel   float64
	tpmLevel   float64
	inflight   int64
	dayCharged int64
}

// failure is one limit that refused the request.
type failure struct {
	reason Reason
	scope  int // index into the request's scopes
	wait   time.Duration
}

// checkScope appends the limits of one scope that the request does not fit. levels must be
// refilled to now; day is the scope's charged total for the current UTC day.
func checkScope(fails []failure, i int, lim config.Limits, v view, reserve int64, untilMidnight time.Duration) []failure {
	if lim.TokensPerDay > 0 && reserve > 0 && v.dayCharged+tokenNeed(reserve, lim.TokensPerDay) > lim.TokensPerDay {
		fails = append(fails, failure{ReasonDailyTokens, i, untilMidnight})
	}
	if lim.RequestsPerMinute > 0 && v.rpmLevel < 1 {
		fails = append(fails, failure{ReasonRequests, i, waitFor(v.rpmLevel, 1, lim.RequestsPerMinute)})
	}
	if lim.TokensPerMinute > 0 && reserve > 0 {
		need := float64(tokenNeed(reserve, lim.TokensPerMinute))
		if v.tpmLevel < need {
			fails = append(fails, failure{ReasonTokens, i, waitFor(v.tpmLevel, need, lim.TokensPerMinute)})
		}
	}
	if lim.ConcurrentRequests > 0 && v.inflight >= lim.ConcurrentRequests {
		// Nobody knows when a slot frees; a second is what clients are told to wait.
		fails = append(fails, failure{ReasonConcurrency, i, time.Second})
	}
	return fails
}

// verdict picks the refusal to report: a spent daily budget wins (retrying soon is useless),
// otherwise the limit that takes longest to clear. RetryAfter covers every failing limit.
func verdict(fails []failure) (worst failure, retry time.Duration) {
	for i, f := range fails {
		if i == 0 || (f.reason == ReasonDailyTokens && worst.reason != ReasonDailyTokens) ||
			(worst.reason != ReasonDailyTokens && f.wait > worst.wait) {
			worst = f
		}
		retry = max(retry, f.wait)
	}
	return worst, roundRetry(retry)
}

// roundRetry gives whole seconds, at least one, as Retry-After carries integers >= 1.
func roundRetry(d time.Duration) time.Duration {
	if d <= time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

const nanosPerDay = int64(24 * time.Hour)

// utcDay numbers UTC days since the epoch.
func utcDay(now time.Time) int64 {
	n := now.UnixNano()
	d := n / nanosPerDay
	if n < 0 && n%nanosPerDay != 0 {
		d--
	}
	return d
}

func untilMidnight(now time.Time) time.Duration {
	next := time.Unix(0, (utcDay(now)+1)*nanosPerDay)
	return next.Sub(now)
}

func dayString(day int64) string {
	return time.Unix(day*86400, 0).UTC().Format("20060102")
}

func minuteOf(now time.Time) int64 { return now.Unix() / 60 }

package ratelimit

import (
	"math"
	"strconv"
	"time"
)

// Headers are the x-ratelimit-* values of one decision. A trio whose Has flag is false is
// unlimited at every scope and is not written.
type Headers struct {
	HasRequests       bool
	LimitRequests     int64
	RemainingRequests int64
	ResetRequests     time.Duration

	HasTokens       bool
	LimitTokens     int64
	RemainingTokens int64
	ResetTokens     time.Duration
}

// HeaderNames name the six headers the figures are written under, for a dialect that calls
// them otherwise than OpenAI's x-ratelimit-*.
type HeaderNames struct {
	LimitRequests, RemainingRequests, ResetRequests string
	LimitTokens, RemainingTokens, ResetTokens       string
}

// Apply writes the headers that apply, e.g. Apply(c.Header) or Apply(w.Header().Set).
func (h Headers) Apply(set func(name, value string)) {
	h.ApplyAs(HeaderNames{
		LimitRequests: "x-ratelimit-limit-requests", RemainingRequests: "x-ratelimit-remaining-requests", ResetRequests: "x-ratelimit-reset-requests",
		LimitTokens: "x-ratelimit-limit-tokens", RemainingTokens: "x-ratelimit-remaining-tokens", ResetTokens: "x-ratelimit-reset-tokens",
	}, FormatReset, set)
}

// ApplyAs writes the headers that apply under names, each reset written by reset.
func (h Headers) ApplyAs(names HeaderNames, reset func(time.Duration) string, set func(name, value string)) {
	if h.HasRequests {
		set(names.LimitRequests, strconv.FormatInt(h.LimitRequests, 10))
		set(names.RemainingRequests, strconv.FormatInt(h.RemainingRequests, 10))
		set(names.ResetRequests, reset(h.ResetRequests))
	}
	if h.HasTokens {
		set(names.LimitTokens, strconv.FormatInt(h.LimitTokens, 10))
		set(names.RemainingTokens, strconv.FormatInt(h.RemainingTokens, 10))
		set(names.ResetTokens, reset(h.ResetTokens))
	}
}

// FormatReset writes a duration the way OpenAI's reset headers do ("12ms", "1s", "6m0s"):
// Go's duration syntax, rounded up to whole milliseconds so no microsecond noise shows.
func FormatReset(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
}

type trio struct {
	ok               bool
	limit, remaining int64
	reset            time.Duration
}

// tighter keeps the trio with fewer remaining; on a tie, the smaller limit.
func (t trio) tighter(o trio) trio {
	if !t.ok || (o.ok && (o.remaining < t.remaining || (o.remaining == t.remaining && o.limit < t.limit))) {
		return o
	}
	return t
}

func bucketTrio(limit int64, level float64) trio {
	rem := int64(math.Floor(level))
	rem = min(max(rem, 0), limit)
	return trio{ok: true, limit: limit, remaining: rem, reset: waitFor(level, float64(limit), limit)}
}

func headersFor(now time.Time, a *admission, views [maxScopes]view) Headers {
	var req, tpm, tpd trio
	for i := 0; i < a.n; i++ {
		lim, v := a.scopes[i].Limits, views[i]
		if lim.RequestsPerMinute > 0 {
			req = req.tighter(bucketTrio(lim.RequestsPerMinute, v.rpmLevel))
		}
		if lim.TokensPerMinute > 0 {
			tpm = tpm.tighter(bucketTrio(lim.TokensPerMinute, v.tpmLevel))
		}
		if lim.TokensPerDay > 0 {
			rem := min(max(lim.TokensPerDay-v.dayCharged, 0), lim.TokensPerDay)
			tpd = tpd.tighter(trio{ok: true, limit: lim.TokensPerDay, remaining: rem, reset: untilMidnight(now)})
		}
	}
	tok := tpm
	if !tok.ok {
		tok = tpd
	}
	return Headers{
		HasRequests: req.ok, LimitRequests: req.limit, RemainingRequests: req.remaining, ResetRequests: req.reset,
		HasTokens: tok.ok, LimitTokens: tok.limit, RemainingTokens: tok.remaining, ResetTokens: tok.reset,
	}
}

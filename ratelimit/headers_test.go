package ratelimit

import (
	"maps"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/testclock"
)

func TestFormatReset(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{12 * time.Millisecond, "12ms"},
		{11*time.Millisecond + 1, "12ms"},
		{time.Second, "1s"},
		{6 * time.Minute, "6m0s"},
		{8640 * time.Millisecond, "8.64s"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := FormatReset(tc.d); got != tc.want {
				t.Fatalf("FormatReset(%v) = %q", tc.d, got)
			}
		})
	}
}

// TestHeaders: the tighter scope's figures, tokens from the minute limit else the day, and
// nothing for a dimension unlimited at both scopes.
func TestHeaders(t *testing.T) {
	untilMidnight := FormatReset(testclock.NextMidnight(start).Sub(start)) // daily tokens reset then
	cases := []struct {
		name      string
		key, team config.Limits
		noTeam    bool
		want      map[string]string
	}{
		{"unlimited", config.Limits{}, config.Limits{}, false, map[string]string{}},
		{"key_tighter_requests", config.Limits{RequestsPerMinute: 10}, config.Limits{RequestsPerMinute: 600}, false, map[string]string{
			"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "9", "x-ratelimit-reset-requests": "6s",
		}},
		{"team_tighter_tokens", config.Limits{TokensPerMinute: 100000}, config.Limits{TokensPerMinute: 2000, TokensPerDay: 50}, false, map[string]string{
			"x-ratelimit-limit-tokens": "2000", "x-ratelimit-remaining-tokens": "1500", "x-ratelimit-reset-tokens": "15s",
		}},
		{"daily_when_no_minute_tokens", config.Limits{TokensPerDay: 10000}, config.Limits{ConcurrentRequests: 4}, false, map[string]string{
			"x-ratelimit-limit-tokens": "10000", "x-ratelimit-remaining-tokens": "9500", "x-ratelimit-reset-tokens": untilMidnight,
		}},
		{"passthrough", config.Limits{RequestsPerMinute: 60, TokensPerMinute: 6000}, config.Limits{}, true, map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-limit-tokens": "6000", "x-ratelimit-remaining-tokens": "5500", "x-ratelimit-reset-tokens": "5s",
		}},
	}
	for _, k := range allKinds() {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				l := k.make(t, newClock(start))
				req := Request{Key: keyScope("h", tc.key), Tokens: 500}
				if !tc.noTeam {
					req.Team = teamScope("h", tc.team)
				}
				_, d := mustAdmit(t, l, req)
				if got := headerMap(d.Headers); !maps.Equal(got, tc.want) {
					t.Fatalf("headers = %v, want %v", got, tc.want)
				}
			})
		}
	}
}

// TestTighterTie: equal remaining picks the smaller limit.
func TestTighterTie(t *testing.T) {
	a := trio{ok: true, limit: 100, remaining: 5}
	b := trio{ok: true, limit: 10, remaining: 5}
	if got := a.tighter(b); got.limit != 10 {
		t.Fatalf("tie picked limit %d", got.limit)
	}
	if got := b.tighter(a); got.limit != 10 {
		t.Fatalf("tie (reversed) picked limit %d", got.limit)
	}
}

func TestRetryAfterRounding(t *testing.T) {
	cases := []struct {
		in, want time.Duration
	}{
		{0, time.Second},
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{time.Second + time.Microsecond, 2 * time.Second},
		{59*time.Second + 1, time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.in.String(), func(t *testing.T) {
			if got := roundRetry(tc.in); got != tc.want {
				t.Fatalf("roundRetry(%v) = %v", tc.in, got)
			}
		})
	}
}

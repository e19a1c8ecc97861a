package ratelimit

import (
	"context"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/testclock"
)

// What is left of tokens_per_day is the tightest of the request's scopes; a request no
// scope limits by day has no figure (-1).
func TestDailyTokensLeft(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			l := k.make(t, newClock(testclock.SameDay(start, time.Minute)))
			key := keyScope("d", config.Limits{TokensPerDay: 1000})
			team := teamScope("d", config.Limits{TokensPerDay: 300})
			tk, _ := mustAdmit(t, l, Request{Key: key, Team: team, Tokens: 100})
			tk.Settle(Usage{InputTokens: 60, OutputTokens: 40})
			ctx := context.Background()
			if got := l.DailyTokensLeft(ctx, Request{Key: key, Team: team}); got != 200 {
				t.Errorf("key and team: %d left, want the team's 200", got)
			}
			if got := l.DailyTokensLeft(ctx, Request{Key: key}); got != 900 {
				t.Errorf("key alone: %d left, want 900", got)
			}
			if got := l.DailyTokensLeft(ctx, Request{Key: keyScope("free", config.Limits{RequestsPerMinute: 5})}); got != -1 {
				t.Errorf("no daily limit: %d, want -1", got)
			}
		})
	}
}

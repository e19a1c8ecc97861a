package ratelimit

import (
	"context"
	"encoding/json"
	"testing"

	"modelgate/config"
)

// crash ends l as a SIGKILL would: its open tickets are never settled. The memory store's
// day counters are written (flushed) first when flushed is set, as the second's flush does
// for an admission older than a second.
func crash(t *testing.T, l *Limiter, flushed bool) {
	t.Helper()
	l.openMu.Lock()
	l.open = map[*Ticket]struct{}{}
	l.openMu.Unlock()
	if m, ok := l.store.(*memoryStore); ok && !flushed {
		m.scopes.Range(func(k, v any) bool { v.(*memScope).dirty = false; return true })
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSettleCrashed: a ticket a killed process left open is settled by the next one from its
// saved state, at its reservation: the day's usage shows it, the slot is free, and what the
// day has charged is at least what it used, whether or not the memory store wrote the
// admission before the kill. On Redis a settle sent twice counts once.
func TestSettleCrashed(t *testing.T) {
	team := config.Limits{ConcurrentRequests: 1, TokensPerDay: 100000, TokensPerMinute: 100000}
	req := Request{Key: keyScope("k", config.Limits{}), Team: teamScope("crash", team), Tokens: 700, Input: 200}
	cases := []struct {
		name    string
		redis   bool
		flushed bool
	}{
		{"memory, admission written", false, true},
		{"memory, admission not written", false, false},
		{"redis", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock(start)
			o := Options{Store: "memory", DataPath: t.TempDir(), Now: c.Now}
			if tc.redis {
				o = Options{Store: redisURL(t), Now: c.Now}
			}
			before, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			tk, _ := mustAdmit(t, before, req)
			// The state goes through the journal as JSON.
			b, err := json.Marshal(tk.State())
			if err != nil {
				t.Fatal(err)
			}
			crash(t, before, tc.flushed)

			after := newLimiter(t, o)
			if tc.redis {
				if _, d := mustAdmit(t, after, req); d.Allowed {
					t.Fatal("the killed process's slot is free before its ticket is settled: the test proves nothing")
				}
			}
			var st TicketState
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatal(err)
			}
			for range 2 { // a second settle (a restart killed again before forgetting) counts on Redis once
				u, err := after.SettleCrashed(context.Background(), st)
				if err != nil {
					t.Fatal(err)
				}
				if u != (Usage{InputTokens: 200, OutputTokens: 500}) {
					t.Fatalf("charged %+v, want the reservation", u)
				}
				if !tc.redis {
					break
				}
			}
			got := usageOf(t, after, *req.Team)
			if got.DayInputTokens != 200 || got.DayOutputTokens != 500 {
				t.Errorf("day usage %d in / %d out, want 200 / 500", got.DayInputTokens, got.DayOutputTokens)
			}
			if left := got.Remaining["tokens_per_day"]; left != 100000-700 {
				t.Errorf("tokens_per_day left %d, want %d", left, 100000-700)
			}
			if got.Remaining["concurrent_requests"] != 1 {
				t.Errorf("concurrent_requests left %d, want 1", got.Remaining["concurrent_requests"])
			}
			next, d := mustAdmit(t, after, req)
			if !d.Allowed {
				t.Fatalf("the slot is still held: %+v", d)
			}
			next.Settle(Usage{InputTokens: 1, OutputTokens: 1})
		})
	}
}

// TestSettleCrashedRefusesBadState: a state with no scope, or more than an admission takes,
// is refused, not settled against nothing.
func TestSettleCrashedRefusesBadState(t *testing.T) {
	l := newLimiter(t, Options{Store: "memory", Now: newClock(start).Now})
	for _, st := range []TicketState{{}, {Scopes: make([]ScopeState, maxScopes+1)}} {
		if _, err := l.SettleCrashed(context.Background(), st); err != ErrBadState {
			t.Errorf("%d scopes: err %v, want ErrBadState", len(st.Scopes), err)
		}
	}
}

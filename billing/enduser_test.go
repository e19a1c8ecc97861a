package billing

import (
	"context"
	"testing"

	"modelgate/testclock"
)

// TestEndUserBudget: a third, day-only budget (an end user's) is held with the key's and the
// team's, refuses alone what overruns it, and keeps no monthly total.
func TestEndUserBudget(t *testing.T) {
	c := testclock.At(testclock.Origin())
	l, _ := NewLedger(context.Background(), nil, c.Now, nil)
	budgets := func(user string) []Budget {
		return []Budget{{Scope: "key:t/k"}, {Scope: "team:t", PerDay: 100}, {Scope: "enduser:t/" + user, PerDay: 10, DayOnly: true}}
	}
	for i, tc := range []struct {
		user    string
		amount  int64
		refused string // the scope refusing; "" = held
	}{
		{"alice", 6, ""},
		{"alice", 6, "enduser:t/alice"},
		{"bob", 6, ""},
		{"alice", 4, ""},
	} {
		h, r := l.Reserve(budgets(tc.user), tc.amount)
		switch {
		case tc.refused == "" && r != nil:
			t.Fatalf("step %d refused: %+v", i, r)
		case tc.refused != "" && (r == nil || r.Scope != tc.refused || r.Period != "day"):
			t.Fatalf("step %d: refusal %+v, want %s's day", i, r, tc.refused)
		case r == nil:
			h.Settle(tc.amount)
		}
	}
	if d, _ := l.Spent("team:t"); d != Amount(16) {
		t.Fatalf("team spent %v", d)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, month := l.days.at(c.Now())
	if _, ok := l.totals[periodScope{month, "enduser:t/alice"}]; ok {
		t.Fatal("an end user got a monthly total")
	}
}

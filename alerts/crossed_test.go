package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"modelgate/store/storetest"
	"modelgate/testclock"
)

// CrossedToday lists the day's claims by time first, and claims of the same instant by
// team, key, budget and threshold, whatever order the store scans them in.
func TestCrossedTodayOrder(t *testing.T) {
	noon := testclock.Origin().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	clk := testclock.At(noon)
	st := storetest.OpenBolt(t, t.TempDir(), clk.Now)
	defer st.Close()
	w := newWatcher(t, st, fastSender(t), &figures{}, clk.Now)
	early, late := noon.Add(-2*time.Second), noon.Add(-time.Second)
	// Stored in reverse of the order wanted: the scan reads them by key.
	want := []Event{
		{Time: early, Team: "zulu", Budget: BudgetSpendDay, Threshold: 100},
		{Time: late, Team: "alpha", Budget: BudgetSpendDay, Threshold: 50},
		{Time: late, Team: "beta", Key: "a", Budget: BudgetTokensDay, Threshold: 50},
		{Time: late, Team: "beta", Key: "b", Budget: BudgetSpendDay, Threshold: 80},
		{Time: late, Team: "beta", Key: "b", Budget: BudgetTokensDay, Threshold: 50},
		{Time: late, Team: "beta", Key: "b", Budget: BudgetTokensDay, Threshold: 80},
	}
	for i, ev := range want {
		body, _ := json.Marshal(ev)
		key := fmt.Sprintf("d%s|%02d", noon.Format("20060102"), len(want)-i)
		if err := st.Put(context.Background(), claimsBucket, key, body, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	got, err := w.CrossedToday(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b Event) bool {
		return a.Time.Equal(b.Time) && a.Team == b.Team && a.Key == b.Key && a.Budget == b.Budget && a.Threshold == b.Threshold
	}
	if !slices.EqualFunc(got, want, same) {
		t.Fatalf("crossed today:\n%+v\nwant\n%+v", got, want)
	}
}

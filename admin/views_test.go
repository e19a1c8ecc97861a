package admin

import (
	"encoding/json"
	"strings"
	"testing"
)

// The spend figures sit flat in a key's and a team's usage object, where the dashboard
// reads them (u.spend_day, t.usage.spend_month).
func TestSpendFieldsAreFlat(t *testing.T) {
	s := spend{SpendDay: 1.5, SpendMonth: 2.25}
	for name, v := range map[string]any{"key": keyUsage{spend: s}, "team": teamNow{spend: s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); !strings.Contains(got, `"spend_day":1.5,"spend_month":2.25}`) {
			t.Errorf("%s usage %s lacks the flat spend fields", name, got)
		}
	}
}

package billing

import "testing"

// FuzzRowKey: a stored history key parses back into the row it names, and parsing any key
// never panics.
func FuzzRowKey(f *testing.F) {
	f.Add("20260101", "alpha", "k1", "gpt-4o-mini")
	f.Add("20261231", "t", "k", "org/model/v2")
	f.Fuzz(func(t *testing.T, day, team, key, model string) {
		id := rowID{day: day, team: team, key: key, model: model}
		got, ok := parseRowKey(id.storeKey())
		valid := len(day) == 8 && !containsSlash(day) && !containsSlash(team) && !containsSlash(key)
		if valid && (!ok || got != id) {
			t.Fatalf("%+v came back as %+v (%t)", id, got, ok)
		}
		_, _ = parseRowKey(day + team + key + model)
	})
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// FuzzAttrKey: an attribution row's key parses back into the row whatever the team's
// dimension, value and model hold, and parsing any key never panics.
func FuzzAttrKey(f *testing.F) {
	f.Add("20261126", "alpha", "feature", "search/v2%", "org/model", true, false)
	f.Add("20261126", "alpha", "", "%", "m", false, true)
	f.Fuzz(func(t *testing.T, day, team, tagKey, value, model string, tag, other bool) {
		id := rowID{day: day, team: team, model: model, kind: userRow}
		if tag {
			id.kind, id.key = tagRow, tagKey
		}
		if other {
			id.other = true
		} else {
			id.value = value
		}
		got, ok := parseAttrKey(id.storeKey())
		valid := len(day) == 8 && !containsSlash(day) && !containsSlash(team)
		if valid && (!ok || got != id) {
			t.Fatalf("%+v came back as %+v (%t)", id, got, ok)
		}
		_, _ = parseAttrKey(day + team + value + model)
	})
}

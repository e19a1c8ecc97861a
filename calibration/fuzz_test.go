package calibration

import (
	"math"
	"testing"
)

// FuzzParseKey: a key read back from the store either is refused or names a slot, a team
// and a model that write the same record key again.
func FuzzParseKey(f *testing.F) {
	for _, k := range []string{"81234|search|gpt-4o-mini", "1||a|b", "81234|gpt-4o-mini", "|t|m", "0012|t|m", "x|y|z", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		slot, team, model, ok := parseKey(key)
		if !ok {
			return
		}
		if slot < 0 || model == "" || len(model) > MaxModelLen || !validTeam(team) {
			t.Fatalf("parseKey(%q) = %d, %q, %q", key, slot, team, model)
		}
		if s2, t2, m2, ok2 := parseKey(recordKey(slot, team, model)); !ok2 || s2 != slot || t2 != team || m2 != model {
			t.Fatalf("round trip of %q: %d, %q, %q, %v", key, s2, t2, m2, ok2)
		}
	})
}

// FuzzFactor: whatever the platform reports, a Factor stays in its bounds and a
// reservation is never below the best figure.
func FuzzFactor(f *testing.F) {
	f.Add(int64(100), int64(200), int64(3), int64(1000))
	f.Add(int64(8), int64(1<<62), int64(1), int64(1<<40))
	f.Add(int64(1<<62), int64(1), int64(7), int64(0))
	f.Fuzz(func(t *testing.T, estimated, reported, n, raw int64) {
		tb := New(nil, nil, nil)
		for range min(max(n, 0), 64) {
			tb.Observe("", "m", estimated, reported)
			tb.Observe("", "m", estimated/2+8, reported/3+1)
		}
		fa := tb.Factor("", "m")
		if fa.Ratio < minRatio || fa.Ratio > maxRatio || fa.Spread < 0 || math.IsNaN(fa.Spread) || math.IsInf(fa.Spread, 0) {
			t.Fatalf("Factor out of bounds: %+v", fa)
		}
		raw = min(max(raw, -1), 1<<40)
		if c, r := fa.Count(raw), fa.Reserve(raw); c < 0 || r < c || float64(r) > float64(max(raw, 0))*maxRatio*(1+maxMargin)+1 {
			t.Fatalf("Count(%d) = %d, Reserve = %d with %+v", raw, c, r, fa)
		}
	})
}

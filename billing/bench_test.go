package billing

import (
	"testing"
	"time"

	"modelgate/config"
)

// BenchmarkPerRequest is everything spend and history add to one call's path: a spend
// reservation against a key and a team budget, the cost, the settlement and the history
// record. The store is written by other goroutines, off this path.
//
//	go test ./billing -run '^$' -bench PerRequest
func BenchmarkPerRequest(b *testing.B) {
	prices := NewPrices(&config.Config{Models: []config.Model{{ID: "m", Price: &config.Price{Input: 0.15, Output: 0.6}}}})
	l, _ := NewLedger(b.Context(), nil, nil, nil)
	r := NewRecorder(nil, time.Hour, nil, nil)
	budgets := [2]Budget{{Scope: "key:team/key", PerDay: 1 << 60}, {Scope: "team:team", PerMonth: 1 << 60}}
	u := Usage{InputTokens: 1200, CachedInputTokens: 200, OutputTokens: 350}
	b.ReportAllocs()
	for b.Loop() {
		h, _ := l.Reserve(budgets[:], prices.Estimate("m", 1200, 4096))
		cost := prices.Cost("m", u)
		h.Settle(cost)
		r.Record("team", "key", "m", u, cost)
	}
}

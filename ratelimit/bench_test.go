package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"modelgate/config"
)

// BenchmarkAdmit measures one admission plus its settle in memory with every limit set on key
// and team. distinct_teams shows there is no global lock (parallel goroutines share nothing);
// shared_team is the worst case, every goroutine contending for one team.
func BenchmarkAdmit(b *testing.B) {
	lim := config.Limits{RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50, ConcurrentRequests: 1 << 20, TokensPerDay: 1 << 60}
	cases := []struct {
		name   string
		teamID func(g int) string
	}{
		{"distinct_teams", func(g int) string { return "team:t" + strconv.Itoa(g) }},
		{"shared_team", func(int) string { return "team:shared" }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			l := newLimiter(b, Options{Store: "memory"})
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := int(next.Add(1))
				req := Request{
					Key:    Scope{ID: "key:t" + strconv.Itoa(g) + "/k", Limits: lim},
					Team:   &Scope{ID: tc.teamID(g), Limits: lim},
					Tokens: 1000,
				}
				for pb.Next() {
					tk, d, err := l.Admit(ctx, req)
					if err != nil || !d.Allowed {
						b.Fatalf("refused: %+v %v", d, err)
					}
					tk.Settle(Usage{InputTokens: 300, OutputTokens: 200})
				}
			})
		})
	}
}

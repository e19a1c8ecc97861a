package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"modelgate/config"
	"modelgate/redisconn/redistest"
)

// BenchmarkAdmit measures one admission plus its settle in memory with every limit set on key
// and team. distinct_teams shows there is no global lock (parallel goroutines share nothing);
// shared_team is the worst case, every goroutine contending for one team.
func BenchmarkAdmit(b *testing.B) {
	cases := []struct {
		name   string
		teamID func(g int) string
	}{
		{"distinct_teams", distinctTeams},
		{"shared_team", func(int) string { return "team:shared" }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			benchAdmitParallel(b, newLimiter(b, Options{Store: "memory"}), tc.teamID)
		})
	}
}

// distinctTeams gives each benchmark goroutine a team of its own.
func distinctTeams(g int) string { return "team:t" + strconv.Itoa(g) }

// benchAdmitParallel admits and settles a 1,000-token call per iteration on every goroutine,
// each with a key of its own and the team teamID names, under limits never reached.
func benchAdmitParallel(b *testing.B, l *Limiter, teamID func(g int) string) {
	lim := config.Limits{RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50, ConcurrentRequests: 1 << 20, TokensPerDay: 1 << 60}
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		g := int(next.Add(1))
		req := Request{
			Key:    Scope{ID: "key:t" + strconv.Itoa(g) + "/k", Limits: lim},
			Team:   &Scope{ID: teamID(g), Limits: lim},
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
}

// BenchmarkAdmitRedis measures one admission plus its settle (two script round trips) on a
// single Redis server and on a 3-node Redis Cluster, with every limit set on key and team and
// each goroutine its own team, as a gateway with many teams sees it. The bar: the
// cluster within 1.5x of the single server.
//
//	go test ./ratelimit -run '^$' -bench AdmitRedis -benchtime 3s -count 3
func BenchmarkAdmitRedis(b *testing.B) {
	topologies := []struct {
		name string
		opts func(b *testing.B) Options
	}{
		{"single", func(b *testing.B) Options {
			return Options{Store: "redis", Redis: config.Redis{Addrs: []string{redistest.Start(b).Addr}}}
		}},
		{"cluster3", func(b *testing.B) Options {
			return Options{Store: "redis", Redis: config.Redis{Addrs: redistest.StartCluster(b, 3).Addrs(), Cluster: true}}
		}},
	}
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			benchAdmitParallel(b, newLimiter(b, tp.opts(b)), distinctTeams)
		})
	}
}

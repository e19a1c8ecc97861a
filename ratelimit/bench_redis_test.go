package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"modelgate/config"
	"modelgate/redisconn/redistest"
)

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
	lim := config.Limits{RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50, ConcurrentRequests: 1 << 20, TokensPerDay: 1 << 60}
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			l := newLimiter(b, tp.opts(b))
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				team := "t" + strconv.FormatInt(next.Add(1), 10)
				req := Request{
					Key:    Scope{ID: "key:" + team + "/k", Limits: lim},
					Team:   &Scope{ID: "team:" + team, Limits: lim},
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

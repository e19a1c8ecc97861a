package ratelimit

import (
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
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			benchAdmitParallel(b, newLimiter(b, tp.opts(b)), distinctTeams)
		})
	}
}

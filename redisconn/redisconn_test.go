package redisconn

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/config"
)

func TestNewPicksTheTopology(t *testing.T) {
	cases := []struct {
		name    string
		r       config.Ratelimit
		want    string // client type
		cluster bool
	}{
		{"url", config.Ratelimit{Store: "redis://:pw-secret@127.0.0.1:6379/2"}, "*redis.Client", false},
		{"block_single", config.Ratelimit{Store: "redis", Redis: config.Redis{Addrs: []string{"127.0.0.1:6379"}, DB: 1}}, "*redis.Client", false},
		{"block_cluster_one_addr", config.Ratelimit{Store: "redis", Redis: config.Redis{Addrs: []string{"127.0.0.1:7000"}, Cluster: true}}, "*redis.ClusterClient", true},
		{"block_cluster", config.Ratelimit{Store: "redis", Redis: config.Redis{Addrs: []string{"a:1", "b:2", "c:3"}, Cluster: true}}, "*redis.ClusterClient", true},
		{"block_sentinel", config.Ratelimit{Store: "redis", Redis: config.Redis{Addrs: []string{"a:26379", "b:26379"}, SentinelMaster: "m"}}, "*redis.Client", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.r, 100*time.Millisecond, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got string
			switch c.UniversalClient.(type) {
			case *redis.Client:
				got = "*redis.Client"
			case *redis.ClusterClient:
				got = "*redis.ClusterClient"
			default:
				got = "other"
			}
			if got != tc.want || c.Cluster != tc.cluster {
				t.Errorf("client %s cluster=%v, want %s cluster=%v", got, c.Cluster, tc.want, tc.cluster)
			}
			if tag := c.HashTag("search"); (tag != "") != tc.cluster || (tc.cluster && tag != "{search}:") {
				t.Errorf("HashTag = %q", tag)
			}
		})
	}
}

func TestNewRejectsWithoutEchoingSecrets(t *testing.T) {
	for _, r := range []config.Ratelimit{
		{Store: "redis://:pw-secret@[::1"},
		{Store: "redis"},
		{Store: "memory"},
	} {
		_, err := New(r, time.Second, nil)
		if err == nil {
			t.Fatalf("%q: no error", r.Store)
		}
		if strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("error echoes the password: %v", err)
		}
	}
}

func TestIsRedis(t *testing.T) {
	for store, want := range map[string]bool{"redis": true, "redis://h:1/0": true, "rediss://h:1/0": true, "memory": false, "": false, "redisx": false} {
		if IsRedis(store) != want {
			t.Errorf("IsRedis(%q) != %v", store, want)
		}
	}
}

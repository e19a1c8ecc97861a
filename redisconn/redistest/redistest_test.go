package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartCluster(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 3)
	t.Logf("cluster up in %v", time.Since(start))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := cc.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Keys in different slots cannot meet in one script: the proof the tags are needed.
	err := cc.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"a", "b"}).Err()
	if err == nil {
		t.Fatal("a script over two slots ran on a cluster")
	}
}

func TestStartSentinel(t *testing.T) {
	start := time.Now()
	s := StartSentinel(t)
	t.Logf("sentinel up in %v", time.Since(start))
	if got := s.MasterAddr(t); got != s.Master.Addr {
		t.Fatalf("master = %s, want %s", got, s.Master.Addr)
	}
	start = time.Now()
	s.Master.Kill()
	s.WaitPromoted(t, 15*time.Second)
	t.Logf("promoted in %v", time.Since(start))
}

// TestClusterPortsLeaveRoomForTheBus: a cluster node's port is one whose bus port (10,000
// higher) exists; a fifth of the ephemeral range does not, and a node given such a port
// exits at once (TestStartCluster failed on it now and then).
func TestClusterPortsLeaveRoomForTheBus(t *testing.T) {
	for range 300 {
		if p := freePort(t, true); p+10000 > 65535 {
			t.Fatalf("cluster port %d: its bus port %d does not exist", p, p+10000)
		}
	}
}

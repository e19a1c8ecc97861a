// Package redistest starts real Redis servers for tests: a single server, a 3-node Cluster
// made with redis-cli --cluster create, and a Sentinel-watched master with one replica. Every
// process listens on loopback on a free high port, works in a temporary directory and is
// killed when the test ends. Without the Debian binaries the test is skipped, unless CI is
// set, where their absence is a failure.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server (or sentinel) process.
type Server struct {
	Addr string
	args []string
	dir  string
	cmd  *exec.Cmd
	// exited is closed when the process of cmd has ended.
	exited <-chan struct{}
	t      testing.TB
}

func binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found and CI is set: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// freePort is a loopback port nothing listens on. A cluster node also needs its bus port,
// 10,000 higher: Redis refuses to start when that passes 65535 (a port above 55535, which
// a fifth of the kernel's ephemeral range is), so for a node both must be free.
func freePort(t testing.TB, cluster bool) int {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ok := true
		if cluster {
			ok = false
			if port+10000 <= 65535 {
				if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
					bus.Close()
					ok = true
				}
			}
		}
		ln.Close()
		if ok {
			return port
		}
	}
}

// startTries is how often Start picks another port for a server that exited at start: the
// port it was given can be taken by another process between the look and the bind.
const startTries = 3

// Start runs redis-server with extra arguments (or a config file as the first one).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	binary(t, "redis-server")
	cluster := slices.Contains(extra, "--cluster-enabled")
	for try := 1; ; try++ {
		port := freePort(t, cluster)
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: t.TempDir(), t: t}
		// A config file comes first; later options override earlier ones, so extra ones win.
		rest := extra
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "--") {
			s.args = append(s.args, rest[0])
			rest = rest[1:]
		}
		s.args = append(s.args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"))
		s.args = append(s.args, rest...)
		s.run()
		t.Cleanup(s.Kill)
		if s.up(10 * time.Second) {
			return s
		}
		log := s.Log()
		s.Kill()
		if try == startTries {
			t.Fatalf("redis-server on %s did not come up after %d tries; its log:\n%s", s.Addr, try, log)
		}
	}
}

func (s *Server) run() {
	s.cmd = exec.Command(binary(s.t, "redis-server"), s.args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		close(exited)
	}(s.cmd)
}

// up waits until the server answers PING (true), or until it exited or limit passed (false).
func (s *Server) up(limit time.Duration) bool {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if c.Ping(context.Background()).Err() == nil {
			return true
		}
		select {
		case <-s.exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// Log is the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// Kill stops the process at once (SIGKILL), like a crashed host.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Pause stops the server with SIGSTOP: its connections stay open and nothing answers, a hung
// host rather than a dead one. The test's end (or Resume) lets it run again.
func (s *Server) Pause() {
	s.t.Helper()
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(s.Resume)
}

// Resume continues a paused server (SIGCONT); on a running one it does nothing.
func (s *Server) Resume() {
	if s.cmd != nil {
		_ = syscall.Kill(s.cmd.Process.Pid, syscall.SIGCONT)
	}
}

// Restart starts a killed server again with the same arguments and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.run()
	waitPing(s.t, s.Addr)
}

func waitPing(t testing.TB, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	waitFor(t, 10*time.Second, addr+" to answer PING", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
}

// waitFor polls cond: it waits for processes to come up, not for time windows.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Server
}

// Addrs are the nodes' host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartCluster starts n cluster-enabled servers (with extra arguments each) and joins them
// with redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes.
func StartCluster(t testing.TB, n int, extra ...string) *Cluster {
	t.Helper()
	cli := binary(t, "redis-cli")
	c := &Cluster{}
	for range n {
		args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000"}, extra...)
		c.Nodes = append(c.Nodes, Start(t, args...))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK(t)
	return c
}

// WaitOK waits until every node reports cluster_state:ok (after creation, or a restart).
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	for _, node := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: node.Addr, MaxRetries: -1})
		waitFor(t, 15*time.Second, node.Addr+" to see the cluster ok", func() bool {
			info, err := cl.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		cl.Close()
	}
}

// NodeOf returns the node that serves key's slot.
func (c *Cluster) NodeOf(t testing.TB, key string) *Server {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr, MaxRetries: -1})
	defer cl.Close()
	slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	shards, err := cl.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shards {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			for _, n := range c.Nodes {
				if n.Addr == s.Nodes[0].Addr {
					return n
				}
			}
		}
	}
	t.Fatalf("no node serves slot %d", slot)
	return nil
}

// Sentinel is a master, one replica and one Sentinel watching them (quorum 1).
type Sentinel struct {
	Master, Replica, Sentinel *Server
	Name                      string
}

// StartSentinel starts the three processes and waits for the replica to be in sync and the
// Sentinel to know it, so a failover can happen as soon as the master dies.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s := &Sentinel{Name: "mgmaster"}
	// No 5s wait for more replicas before a diskless full sync.
	s.Master = Start(t, "--repl-diskless-sync-delay", "0")
	s.Replica = Start(t, "--repl-diskless-sync-delay", "0", "--replicaof", strings.Replace(s.Master.Addr, ":", " ", 1))
	rc := redis.NewClient(&redis.Options{Addr: s.Replica.Addr, MaxRetries: -1})
	defer rc.Close()
	// After a diskless full sync the master holds the write stream back until the replica's
	// first acknowledgement (up to a second later): a write seen on the replica proves the
	// stream flows, so a failover from now on loses nothing but the last instant's writes.
	mc := redis.NewClient(&redis.Options{Addr: s.Master.Addr, MaxRetries: -1})
	defer mc.Close()
	if err := mc.Set(context.Background(), "redistest:probe", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the replica to sync", func() bool {
		v, err := rc.Get(context.Background(), "redistest:probe").Result()
		return err == nil && v == "1"
	})

	host, port, _ := net.SplitHostPort(s.Master.Addr)
	_, rport, _ := net.SplitHostPort(s.Replica.Addr)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	// known-replica spares the Sentinel its first discovery round (INFO every 10s).
	text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 1\n"+
		"sentinel down-after-milliseconds %[1]s 300\n"+
		"sentinel failover-timeout %[1]s 2000\n"+
		"sentinel parallel-syncs %[1]s 1\n"+
		"sentinel known-replica %[1]s %[2]s %[4]s\n", s.Name, host, port, rport)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Sentinel = Start(t, conf, "--sentinel")
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr, MaxRetries: -1})
	defer sc.Close()
	waitFor(t, 15*time.Second, "the sentinel to see the replica", func() bool {
		reps, err := sc.Replicas(context.Background(), s.Name).Result()
		return err == nil && len(reps) == 1
	})
	return s
}

// MasterAddr asks the Sentinel which server is master now.
func (s *Sentinel) MasterAddr(t testing.TB) string {
	t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr, MaxRetries: -1})
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(context.Background(), s.Name).Result()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(a[0], a[1])
}

// WaitPromoted waits until the Sentinel names the replica as master and it accepts writes.
func (s *Sentinel) WaitPromoted(t testing.TB, limit time.Duration) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: s.Replica.Addr, MaxRetries: -1})
	defer rc.Close()
	waitFor(t, limit, "the replica's promotion", func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "role:master") && s.MasterAddr(t) == s.Replica.Addr
	})
}

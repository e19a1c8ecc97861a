// Package redistest starts private redis-server processes for tests, on loopback ports
// of their own, and stops them when the test ends.
package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binary returns the path of redis-server. Without it the test is skipped locally; in CI
// (CI set) it fails, so a missing install step cannot pass as a green run.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found and CI is set: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	return bin
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start runs one redis-server with no persistence and returns its address (host:port).
// Extra arguments are passed to the server.
func Start(t testing.TB, extra ...string) string {
	t.Helper()
	bin := Binary(t)
	port := FreePort(t)
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	WaitUp(t, addr)
	return addr
}

// WaitUp waits until a server answers PING at addr, for at most five seconds.
func WaitUp(t testing.TB, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c.Ping(context.Background()).Err() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server at %s did not come up", addr)
		}
		time.Sleep(10 * time.Millisecond) // waiting for a process to start, not for a window
	}
}

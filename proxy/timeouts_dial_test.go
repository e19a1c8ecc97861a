package proxy

import (
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"modelgate/config"
)

// blackhole returns a loopback address whose connects hang: a listening socket with a full
// accept queue that nobody accepts from, so the kernel drops further SYNs.
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.DialTimeout("tcp", addr, time.Second) // takes the only queue slot
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
		c.Close()
		t.Skip("this kernel accepts connects beyond the backlog; no blackhole to test against")
	}
	return addr
}

// A platform that never completes the TCP handshake is a gateway timeout once dial_timeout
// has passed, on both generation routes, without retries piling up.
func TestDialTimeoutToBlackholedPlatform(t *testing.T) {
	const dialTimeout = 300 * time.Millisecond
	dead := "http://" + blackhole(t)
	env := newTestEnv(t, "", func(c *config.Config) {
		zero := 0
		c.Upstream.MaxRetries = &zero
		c.Upstream.DialTimeout = dialTimeout
		c.Upstream.GatewayURL = dead
	})
	tests := []struct{ name, path, body string }{
		{"responses", "/v1/responses", `{"model":"sim-chat","input":"hi"}`},
		{"chat_stream", "/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			status, _, body := env.do(t, "POST", tt.path, keyAlpha1, []byte(tt.body))
			took := time.Since(start)
			if status != http.StatusGatewayTimeout {
				t.Fatalf("status %d, want 504: %s", status, body)
			}
			assertOpenAIError(t, body)
			// Well under any other timeout in play (response header 60s, request 10m), with
			// room for a loaded machine running the race detector.
			if took < dialTimeout || took > dialTimeout*3 {
				t.Errorf("answered after %v; want about the dial timeout %v", took, dialTimeout)
			}
		})
	}
}

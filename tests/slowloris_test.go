package tests

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A client that dribbles its request headers is cut off by read_header_timeout, so slow
// clients cannot hold connections open indefinitely.
func TestSlowHeadersAreCutOff(t *testing.T) {
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{
		ConfigYAML: keysConfig(p, "server:\n  read_header_timeout: 1s\n"),
		Env:        keysEnv(p),
	})
	// The clock starts before the dial: the server's header timeout starts once it accepted
	// the connection, which can be before Dial returns here (a start taken after the dial
	// once measured 998 ms to a close the server made at its 1 s).
	start := time.Now()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/responses HTTP/1.1\r\nHost: modelgate\r\n"); err != nil {
		t.Fatal(err)
	}
	// One header byte every 200 ms: the request line arrived, the headers never end.
	closed := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := conn.Read(buf); err != nil {
				closed <- time.Since(start)
				return
			}
		}
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case took := <-closed:
			if took < time.Second {
				t.Fatalf("closed after %v, before read_header_timeout", took)
			}
			return
		case <-tick.C:
			_, _ = io.WriteString(conn, "X")
		case <-deadline:
			t.Fatal("a client dribbling headers kept its connection for 5 s; read_header_timeout is 1 s")
		}
	}
}

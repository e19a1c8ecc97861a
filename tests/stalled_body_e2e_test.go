package tests

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// stalledConfig gives team alpha a key with one request a minute (alpha-1) and one without
// limits (alpha-2).
func stalledConfig(p *platform, server string) string {
	return gatewayYAML{
		models: "  - id: sim-chat\n",
		teams: `  - name: alpha
    keys:
      - name: alpha-1
        key: ${ALPHA_KEY}
        limits: { requests_per_minute: 1 }
      - name: alpha-2
        key: ${ALPHA2_KEY}
`,
		more: adminKeys + "server:\n" + server,
	}.render(p)
}

// stallMany sends n stalled gzip bodies with key at once (stallGzip, 10 s each) and returns
// each connection's status and error; the connections stay open until the test ends.
// stalledBodyDeadline is the test's server.body_read_timeout. It is far longer than
// inflating what the room admits takes even under the race detector on a loaded machine (a
// 3 s deadline cut bodies still inflating there, so they were answered 408 before the room
// could refuse them), so the answers show the room's decisions, not the machine's speed.
const stalledBodyDeadline = 12 * time.Second

func stallMany(t *testing.T, g *gateway, key string, gz []byte, n int) ([]int, []error) {
	statuses, errs := make([]int, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var conn net.Conn
			conn, statuses[i], errs[i] = stallGzip(g, key, gz, stalledBodyDeadline+10*time.Second)
			if conn != nil {
				t.Cleanup(func() { conn.Close() })
			}
		})
	}
	wg.Wait()
	return statuses, errs
}

// gzipZeros is n zero bytes gzipped: a thousandth of n on the wire.
func gzipZeros(t testing.TB, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for ; n > 0; n -= min(n, len(zeros)) {
		zw.Write(zeros[:min(n, len(zeros))])
	}
	zw.Close()
	return b.Bytes()
}

// rssBytes is the process's resident set size, from /proc.
func rssBytes(t testing.TB, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// stallGzip sends a chat request with the whole of gz but declares one more byte than that,
// so the body never ends; the answer, if one comes within wait, is returned.
func stallGzip(g *gateway, key string, gz []byte, wait time.Duration) (net.Conn, int, error) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		return nil, 0, err
	}
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: modelgate\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", key, len(gz)+1)
	if _, err := conn.Write(append([]byte(head), gz...)); err != nil {
		return conn, 0, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return conn, 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return conn, resp.StatusCode, nil
}

// The stalled-body attack of issue 24: twelve connections each send 31 KB of gzip that
// inflates to 31 MiB, then stall. With the key already at 429 each is refused before its
// body is read, and the process grows by less than 64 MB; with a key that is admitted, the
// bodies being inflated at once share server.max_inflating_bytes, the rest are refused
// with 503 at once, and a stalled body is cut at server.body_read_timeout.
func TestStalledGzipBodiesHoldNoMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads RSS from /proc")
	}
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: stalledConfig(p, fmt.Sprintf("  body_read_timeout: %s\n", stalledBodyDeadline)), Env: keysEnv(p)})
	pid := g.cmd.Process.Pid
	gz := gzipZeros(t, 31<<20)
	t.Logf("attack body: %d bytes of gzip, %d MiB inflated", len(gz), 31)

	// The key spends its one request of the minute.
	if status, body := opsMust(t, "POST", g.URL+"/v1/chat/completions", alphaKey, chatBody("sim-chat", "hi", false)); status != 200 {
		t.Fatalf("first request: %d %s", status, body)
	}
	before := rssBytes(t, pid)
	statuses, errs := stallMany(t, g, alphaKey, gz, 12)
	for i := range statuses {
		if errs[i] != nil || statuses[i] != http.StatusTooManyRequests {
			t.Fatalf("connection %d: status %d, %v (want 429 before the body is read)", i, statuses[i], errs[i])
		}
	}
	growth := rssBytes(t, pid) - before
	t.Logf("key at 429: RSS %d MiB -> grew %d MiB", before>>20, growth>>20)
	if growth >= 64<<20 {
		t.Fatalf("twelve stalled gzip bodies of a key at 429 grew the process by %d MiB", growth>>20)
	}

	// An admitted key: the default room (64 MiB) holds one 31 MiB body being inflated; the
	// others are refused with 503 at once, and the held one is cut at the deadline.
	before = rssBytes(t, pid)
	start := time.Now()
	statuses, errs = stallMany(t, g, alpha2Key, gz, 12)
	count := map[int]int{}
	for i := range statuses {
		if errs[i] != nil {
			t.Fatalf("connection %d: %v (every stalled body must be answered within the deadline)", i, errs[i])
		}
		count[statuses[i]]++
	}
	growth = rssBytes(t, pid) - before
	t.Logf("admitted key: %v after %v; RSS grew %d MiB", count, time.Since(start).Round(time.Millisecond), growth>>20)
	if count[http.StatusServiceUnavailable] < 10 || count[http.StatusRequestTimeout] < 1 ||
		count[http.StatusServiceUnavailable]+count[http.StatusRequestTimeout] != len(statuses) {
		t.Fatalf("answers %v: want the bodies beyond the inflating room refused with 503 and the rest cut with 408", count)
	}
	// The room bounds the live bodies (64 MiB); the heap may hold as much again in garbage
	// before a collection. The race detector's shadow memory multiplies all of it, so the
	// bound holds for the binary as shipped.
	if !raceEnabled && growth >= 192<<20 {
		t.Fatalf("twelve stalled gzip bodies of an admitted key grew the process by %d MiB", growth>>20)
	}
	// The process is alive and serves.
	if status, body := opsMust(t, "POST", g.URL+"/v1/chat/completions", alpha2Key, chatBody("sim-chat", "hi", false)); status != 200 {
		t.Fatalf("after the attack: %d %s", status, body)
	}
}

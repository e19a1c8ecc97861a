package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/reqlog"
)

// stackChildEnv marks the child process TestOpenStreamStack runs its check in.
const stackChildEnv = "MODELGATE_STACK_CHILD"

// TestOpenStreamStack: the goroutine that serves a stream holds it open for minutes on an
// 8 KB stack, for each streaming route. Go doubles a stack that runs out and keeps it
// doubled while the goroutine lives, so one deep moment between the request and its first
// event (the header write under startStream is the deepest) would make every open stream
// hold 16 KB instead of 8 KB; with a thousand streams open that is 8 MB (bench/README.md).
//
// The check runs in a child process whose stacks are capped at 8 KB (debug.SetMaxStack)
// from the moment a fresh connection is opened until the stream waits for the platform's
// next event. Growing past the cap is a fatal "stack overflow" there, and its trace names
// the call chain that needed more; bench/tools/stackgrowth.py finds the same in a running
// binary. Frame sizes depend on the architecture and on instrumentation, so the budget is
// checked on amd64 without the race detector.
func TestOpenStreamStack(t *testing.T) {
	if raceEnabled || runtime.GOARCH != "amd64" {
		t.Skip("the 8 KB budget is checked on amd64 without the race detector")
	}
	if inChild, out, err := apitest.RunInChild(t, stackChildEnv); !inChild {
		if err != nil {
			t.Fatalf("an open stream needed more than 8 KB of stack: %v\n%s", err, firstLines(out, 150))
		}
		return
	}

	// Requests that ended, log line written: a request still ending while the cap is on
	// would be checked against a budget that is not its own.
	var ended atomic.Int64
	waitEnded := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for ended.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d requests ended", ended.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	env := startEnv(t, envOptions{
		hooks:    reqlog.Hooks{RequestStarted: func() {}, RequestDone: func(reqlog.RequestSummary) { ended.Add(1) }},
		upstream: holdingUpstream{},
		// The bench's modelgate answers with the overhead header: its writer adds a frame.
		mutate: func(c *config.Config) { c.Server.OverheadHeader = true },
	})
	routes := []struct{ path, body string }{
		{"/v1/responses", `{"model":"sim-chat","input":"hi","stream":true}`},
		{"/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"sim-chat","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for i, r := range routes {
		// Once through to the end first: what runs only on a first call (pools, lazy
		// tables) is not what every stream costs.
		warm := openRawStream(t, env.front.URL, r.path, strings.Replace(r.body, "hi", "finish", 1))
		_, _ = io.Copy(io.Discard, warm)
		warm.Close()
		// The previous route's stream and this warm-up end on their own goroutines, after
		// the client has left: on a loaded machine, late enough to meet the cap.
		waitEnded(int64(2*i + 1))

		old := debug.SetMaxStack(8 << 10)
		s := openRawStream(t, env.front.URL, r.path, r.body)
		time.Sleep(50 * time.Millisecond) // the relay is back waiting for the platform
		debug.SetMaxStack(old)            // ending the request (its log line) may go deeper
		s.Close()
	}
}

// openRawStream sends a stream request on a new connection and returns once the first event
// arrived. The client is raw TCP, so it adds no deep stack of its own while the cap is on.
func openRawStream(t *testing.T, base, path, body string) *streamConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	rw := bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn))
	fmt.Fprintf(rw, "POST %s HTTP/1.1\r\nHost: modelgate\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		path, keyAlpha1, len(body), body)
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	status, err := rw.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("%s: %q %v", path, status, err)
	}
	// Headers, then the first event's "data:" line.
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: no event: %v", path, err)
		}
		if strings.HasPrefix(line, "data:") {
			break
		}
	}
	return &streamConn{ReadWriter: rw, conn: conn}
}

type streamConn struct {
	*bufio.ReadWriter
	conn net.Conn
}

func (s *streamConn) Close() error { return s.conn.Close() }

// holdingUpstream is the platform for TestOpenStreamStack: a Responses stream that sends
// its opening events and then waits until the caller leaves, or, for an input of "finish",
// completes at once.
type holdingUpstream struct{}

func (holdingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"sim-chat\",\"output\":[]}}\n\n"+
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\"}\n\n")
	w.(http.Flusher).Flush()
	if !strings.Contains(string(body), "finish") {
		<-r.Context().Done()
		return
	}
	fmt.Fprint(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"sim-chat\",\"output\":[{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hello\"}]}],\"usage\":{\"input_tokens\":3,\"output_tokens\":1,\"total_tokens\":4}}}\n\n")
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(string(b), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

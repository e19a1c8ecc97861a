package proxy

import (
	"bufio"
	"context"
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
// 8 KB stack, for each streaming route and each way of speaking to the platform. Go doubles
// a stack that runs out and keeps it doubled while the goroutine lives, so one deep moment
// between the request and its first event (the wait for the platform's answer headers is
// the deepest) would make every open stream hold 16 KB instead of 8 KB; with a thousand
// streams open that is 8 MB (bench/README.md).
//
// The check runs in a child process whose stacks are capped at 8 KB (debug.SetMaxStack)
// from the moment a fresh connection is opened until the stream waits for the platform's
// next event. Growing past the cap is a fatal "stack overflow" there, and its trace names
// the call chain that needed more; bench/tools/stackgrowth.py finds the same in a running
// binary. The runtime grows a stack under the header wait only when it allocates there
// (a sudog, a span refill), which it does in some runs and not others, so
// TestStreamHeaderWaitDepth checks the room left at that wait in every run. Frame sizes
// depend on the architecture and on instrumentation, so the budget is checked on amd64
// without the race detector.
func TestOpenStreamStack(t *testing.T) {
	if raceEnabled || runtime.GOARCH != "amd64" {
		t.Skip("the 8 KB budget is checked on amd64 without the race detector")
	}
	for _, mode := range upstreamModes {
		t.Run(mode.name, func(t *testing.T) {
			if inChild, out, err := apitest.RunInChild(t, stackChildEnv); !inChild {
				if err != nil {
					t.Fatalf("an open stream needed more than 8 KB of stack: %v\n%s", err, firstLines(out, 150))
				}
				return
			}
			// The platform answers at once: the runtime's own growth under the waits is
			// what this check may meet.
			env, ended := startStackEnv(t, mode.env, holdingUpstream{})
			for i, r := range stackRoutes {
				warmStream(t, env, ended, i, r)
				old := debug.SetMaxStack(8 << 10)
				s := sendRawStream(t, env.front.URL, r.path, r.body)
				s.readFirstEvent(t, r.path)
				waitHandler(t, r.path, atEventWait) // the relay is back waiting for the platform
				debug.SetMaxStack(old)              // ending the request (its log line) may go deeper
				s.Close()
			}
		})
	}
}

// upstreamModes are the ways modelgate speaks to the platform.
var upstreamModes = []struct {
	name string
	env  envOptions
}{
	{name: "h1"},
	{name: "h2", env: envOptions{tlsH2: true}}, // TLS with ALPN, upstream.http2 auto: production's case
	{name: "h2c", env: envOptions{h2c: true}},
}

// stackRoutes are the streaming routes the stack checks open, each with a body that asks for a stream.
var stackRoutes = []struct{ name, path, body string }{
	{"responses", "/v1/responses", `{"model":"sim-chat","input":"hi","stream":true}`},
	{"chat", "/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"messages", "/v1/messages", `{"model":"sim-chat","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"gemini", "/v1beta/models/sim-chat:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	// An agent's streams declare tools, whose schemas are the deepest parse (declaresTools).
	{"chat-tools", "/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]}`},
	{"messages-tools", "/v1/messages", `{"model":"sim-chat","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"string"}}}}]}`},
	{"responses-tools", "/v1/responses", `{"model":"sim-chat","input":"hi","stream":true,"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}]}`},
	{"gemini-tools", "/v1beta/models/sim-chat:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","description":"d","parametersJsonSchema":{"type":"object","properties":{"a":{"type":"string"}}}}]}]}`},
}

// startStackEnv starts modelgate as the stack checks run it, before up, and returns it with
// a count of the requests that ended (their log line written).
func startStackEnv(t *testing.T, o envOptions, up holdingUpstream) (*testEnv, *atomic.Int64) {
	ended := new(atomic.Int64)
	o.hooks = reqlog.Hooks{RequestStarted: func() {}, RequestDone: func(reqlog.RequestSummary) { ended.Add(1) }}
	o.upstream = up
	// The bench's modelgate answers with the overhead header: its writer adds a frame.
	o.mutate = func(c *config.Config) { c.Server.OverheadHeader = true }
	return startEnv(t, o), ended
}

// warmStream runs route r once through to the end, the i-th route the env has served: what
// runs only on a first call (pools, lazy tables, the upstream connection) is not what every
// stream costs. It returns once the streams before it and this one have ended: a request
// still ending while a cap is on would be checked against a budget that is not its own.
func warmStream(t *testing.T, env *testEnv, ended *atomic.Int64, i int, r struct{ name, path, body string }) {
	t.Helper()
	warm := sendRawStream(t, env.front.URL, r.path, strings.Replace(r.body, "hi", "finish", 1))
	warm.readFirstEvent(t, r.path)
	_, _ = io.Copy(io.Discard, warm)
	warm.Close()
	// The previous route's stream and this warm-up end on their own goroutines, after the
	// client has left: on a loaded machine, late enough to meet the cap.
	n := int64(2*i + 1)
	if !waitFor(10*time.Second, func() bool { return ended.Load() >= n }) {
		t.Fatalf("%d of %d requests ended", ended.Load(), n)
	}
}

// atEventWait: the handler waits in the relay's reader for the platform's next event.
func atEventWait(status, trace string) bool {
	return status != "running" && status != "runnable" && strings.Contains(trace, "\nmodelgate/relay.(*EventReader).Next(")
}

// waitHandler waits until the goroutine serving path's stream is parked where at says (at
// is given the goroutine's status and its trace) and returns its trace.
func waitHandler(t *testing.T, path string, at func(status, trace string) bool) string {
	t.Helper()
	buf := make([]byte, 1<<20)
	var found string
	parked := waitFor(10*time.Second, func() bool {
		n := runtime.Stack(buf, true)
		found = findHandler(string(buf[:n]), at)
		return found != ""
	})
	if !parked {
		t.Fatalf("%s: the stream's handler did not get where it was awaited", path)
	}
	return found
}

// findHandler returns, of the goroutines in a traceback of all of them, the first that
// serves a modelgate route and that at accepts, from its header line on; "" if none.
func findHandler(dump string, at func(status, trace string) bool) string {
	for _, g := range strings.Split(dump, "\ngoroutine ") {
		header, _, _ := strings.Cut(g, "\n")
		_, status, ok := strings.Cut(header, " [")
		if !ok {
			continue
		}
		status, _, _ = strings.Cut(status, "]")
		status, _, _ = strings.Cut(status, ",") // "[select, 2 minutes]"
		if strings.Contains(g, "\nnet/http.(*conn).serve(") && strings.Contains(g, "\nmodelgate/proxy.") && at(status, g) {
			return "goroutine " + g
		}
	}
	return ""
}

// sendRawStream sends a stream request on a new connection. The client is raw TCP, so it
// adds no deep stack of its own while the cap is on.
func sendRawStream(t *testing.T, base, path, body string) *streamConn {
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
	return &streamConn{ReadWriter: rw, conn: conn}
}

// readFirstEvent reads the answer's status and headers and its first event's "data:" line.
func (s *streamConn) readFirstEvent(t *testing.T, path string) {
	t.Helper()
	status, err := s.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("%s: %q %v", path, status, err)
	}
	for {
		line, err := s.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: no event: %v", path, err)
		}
		if strings.HasPrefix(line, "data:") {
			return
		}
	}
}

type streamConn struct {
	*bufio.ReadWriter
	conn net.Conn
}

func (s *streamConn) Close() error { return s.conn.Close() }

// holdingUpstream is the platform for the stack checks: a Responses stream that, when
// headers is set, waits for a value on it before it answers, then sends its opening events and then waits until
// the caller leaves, or, for an input of "finish", answers at once and completes.
type holdingUpstream struct{ headers chan struct{} }

func (u holdingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	finish := strings.Contains(string(body), "finish")
	if !finish && u.headers != nil {
		select {
		case <-u.headers:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"sim-chat\",\"output\":[]}}\n\n"+
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\"}\n\n")
	w.(http.Flusher).Flush()
	if !finish {
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

// thinkingUpstream answers a stream with its headers and response.created, then sends
// nothing more until the call is cancelled: a model that thinks before its first token.
type thinkingUpstream struct{}

func (thinkingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"sim-chat\",\"output\":[]}}\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// A stream's headers wait for the platform's first bytes, not for the model's first token:
// while the model thinks, every streaming route's client already has its 200 and headers
// (relay.Writer.BeforeWait), so a client's header timeout does not run out under a long
// first token.
func TestStreamHeadersWhileThePlatformThinks(t *testing.T) {
	env := startEnv(t, envOptions{upstream: thinkingUpstream{}})
	for _, r := range stackRoutes[:4] {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.front.URL+r.path, strings.NewReader(r.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+keyAlpha1)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req) // returns once the headers are in
			if err != nil {
				t.Fatalf("no headers while the platform thinks: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, Content-Type %q; want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		})
	}
}

package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/platform"
)

// sharedPlatform streams Responses events over cleartext HTTP/2 and records what it managed
// to write. A request whose input is "flood" gets deltas as fast as the stream takes them, up
// to floodBytes and then response.completed; "tick" gets tickEvents deltas, one every
// tickEvery, each naming its number.
type sharedPlatform struct {
	floodBytes int64

	flooded   atomic.Int64 // bytes of the flood's events its handler has written
	floodDone chan error   // the flood handler's end: nil when it finished, else why not

	mu    sync.Mutex
	conns map[string]int // remote address -> streams that arrived on it
}

const (
	tickEvents = 40
	tickEvery  = 10 * time.Millisecond
	floodDelta = 1 << 10
)

func (p *sharedPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.conns[r.RemoteAddr]++
	p.mu.Unlock()
	var body struct {
		Input string `json:"input"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	seq := 0
	event := func(typ, data string) (int, error) {
		seq++
		n, err := fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, data)
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		return n, err
	}
	id := "resp_" + body.Input
	if _, err := event("response.created", `"response":{"id":"`+id+`","object":"response","created_at":1,"status":"in_progress","model":"sim-chat","output":[]}`); err != nil {
		return
	}
	deltas := 0
	switch body.Input {
	case "flood":
		pad := strings.Repeat("f", floodDelta)
		var err error
		for p.flooded.Load() < p.floodBytes && err == nil {
			var n int
			n, err = event("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"`+pad+`"`)
			p.flooded.Add(int64(n))
			deltas++
		}
		if err == nil {
			_, err = event("response.completed", completed(id, deltas))
		}
		p.floodDone <- err
	case "tick":
		for i := 0; i < tickEvents; i++ {
			if _, err := event("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"tick`+strconv.Itoa(i)+` "`); err != nil {
				return
			}
			deltas++
			select {
			case <-time.After(tickEvery):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = event("response.completed", completed(id, deltas))
	}
}

func completed(id string, deltas int) string {
	return `"response":{"id":"` + id + `","object":"response","created_at":1,"status":"completed","model":"sim-chat","output":[],` +
		`"usage":{"input_tokens":1,"output_tokens":` + strconv.Itoa(deltas) + `,"total_tokens":` + strconv.Itoa(deltas+1) + `}}`
}

func (p *sharedPlatform) connCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// relayHoldBound is the most of a stalled stream modelgate may hold in its own memory: the
// stream's HTTP/2 window, which the transport buffers, and the relay's buffers (its read
// buffer, an event in hand, the response writer's buffer).
const relayHoldBound = platform.StreamReceiveWindow + 128<<10

// slowClientRcvBuf is the slow client's socket receive buffer (the kernel doubles it).
const slowClientRcvBuf = 16 << 10

// tcpQueues returns the bytes waiting in the send queue of the loopback TCP socket bound to
// local port port, and in its receive queue, as /proc/net/tcp reports them.
func tcpQueues(t *testing.T, port int) (tx, rx int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("socket queues unreadable: %v", err)
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != want {
			continue
		}
		q := strings.SplitN(f[4], ":", 2)
		txq, _ := strconv.ParseInt(q[0], 16, 64)
		rxq, _ := strconv.ParseInt(q[1], 16, 64)
		return txq, rxq
	}
	t.Fatalf("no socket on port %d in /proc/net/tcp", port)
	return 0, 0
}

// TestSlowReaderOnSharedConnection: several client streams share one HTTP/2 connection to the
// platform. One client stops reading while the platform keeps writing. The others' events go
// on arriving on time; the platform can write only a bounded amount on the stalled stream
// (its window plus what the relay and the sockets hold); and when the slow client resumes it
// gets its whole answer, or when it leaves the stream is reset upstream, with no goroutine
// left behind either way.
func TestSlowReaderOnSharedConnection(t *testing.T) {
	for _, then := range []string{"resumes", "leaves"} {
		t.Run(then, func(t *testing.T) {
			up := &sharedPlatform{floodBytes: 64 << 20, floodDone: make(chan error, 1), conns: map[string]int{}}
			env := newResEnv(t, envOptions{upstream: up, h2c: true})

			var slowConn atomic.Pointer[net.TCPConn]
			slowTr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if tc, ok := c.(*net.TCPConn); ok {
					// Small and fixed: the kernel stops autotuning it, so what the platform
					// writes is held on modelgate's side of the socket, not the test's.
					_ = tc.SetReadBuffer(slowClientRcvBuf)
					slowConn.Store(tc)
				}
				return c, err
			}}
			t.Cleanup(slowTr.CloseIdleConnections)
			slowClient := &http.Client{Transport: slowTr}
			req, err := newPost(env.front.URL+"/v1/responses", `{"model":"sim-chat","input":"flood","stream":true}`)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+keyAlpha1)
			slow, err := slowClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Body.Close()
			if slow.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(slow.Body)
				t.Fatalf("flood stream: %d %s", slow.StatusCode, b)
			}

			// The stall: the platform's writes on the flood stop growing.
			var last int64 = -1
			if !waitFor(20*time.Second, func() bool {
				n := up.flooded.Load()
				stalled := n == last && n > 0
				last = n
				time.Sleep(100 * time.Millisecond) // the window a stalled count must hold still over
				return stalled || n >= up.floodBytes
			}) {
				t.Fatalf("the flood never stalled: %d bytes written", up.flooded.Load())
			}
			// What the platform wrote sits in the client's socket, in modelgate's socket
			// towards it (kernel memory, bounded by tcp_wmem), and in modelgate itself.
			stalledAt := up.flooded.Load()
			clientPort := slowConn.Load().LocalAddr().(*net.TCPAddr).Port
			_, clientRx := tcpQueues(t, clientPort)
			var serverTx int64
			if b, err := os.ReadFile("/proc/net/tcp"); err == nil {
				serverTx = frontSendQueue(string(b), env.front.Listener.Addr().(*net.TCPAddr).Port, clientPort)
			}
			held := stalledAt - clientRx - serverTx - 4<<10 // the client's own read buffer
			t.Logf("the platform wrote %d KiB on the stalled stream: %d KiB in the client's socket, %d KiB in modelgate's send queue, %d KiB in modelgate (bound %d KiB)",
				stalledAt>>10, clientRx>>10, serverTx>>10, held>>10, relayHoldBound>>10)
			if stalledAt >= up.floodBytes || held > relayHoldBound {
				t.Fatalf("on a stalled stream the platform wrote %d bytes, %d of them held in modelgate; want at most %d held", stalledAt, held, relayHoldBound)
			}

			// Other streams on the same connection keep their pace.
			const others = 4
			gaps := make(chan time.Duration, others)
			errs := make(chan error, others)
			var wg sync.WaitGroup
			for i := 0; i < others; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					worst, err := tickStream(env)
					gaps <- worst
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			close(gaps)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			var worst time.Duration
			for g := range gaps {
				worst = max(worst, g)
			}
			t.Logf("the other streams' longest wait between events: %v (the platform sends one every %v)", worst, tickEvery)
			if worst > time.Second {
				t.Errorf("a stream beside the stalled one waited %v between events", worst)
			}
			if n := up.connCount(); n != 1 {
				t.Errorf("the streams arrived on %d connections; want them sharing 1", n)
			}
			if n := up.flooded.Load(); n != stalledAt {
				t.Errorf("the stalled stream moved from %d to %d bytes while its client read nothing", stalledAt, n)
			}

			switch then {
			case "resumes":
				_ = slowConn.Load().SetReadBuffer(1 << 20) // read the rest at full pace
				b, err := io.ReadAll(slow.Body)
				if err != nil {
					t.Fatalf("reading the rest of the flood: %v", err)
				}
				if !strings.Contains(string(b[max(len(b)-400, 0):]), "response.completed") {
					t.Errorf("the resumed stream ended without response.completed: ...%s", tail(b))
				}
				if err := <-up.floodDone; err != nil {
					t.Errorf("the flood handler failed: %v", err)
				}
			case "leaves":
				slow.Body.Close()
				slowTr.CloseIdleConnections()
				select {
				case err := <-up.floodDone:
					if err == nil {
						t.Error("the flood finished though its client left")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the platform's stream was not reset after the client left")
				}
			}
		})
	}
}

// tickStream reads one "tick" stream to its end and returns the longest wait between two of
// its events.
func tickStream(env *resEnv) (time.Duration, error) {
	req, err := newPost(env.front.URL+"/v1/responses", `{"model":"sim-chat","input":"tick","stream":true}`)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+keyAlpha2)
	resp, err := env.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("tick stream: status %d", resp.StatusCode)
	}
	var worst time.Duration
	prev := time.Now()
	deltas, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "event: ") {
			continue
		}
		now := time.Now()
		worst = max(worst, now.Sub(prev))
		prev = now
		switch strings.TrimPrefix(line, "event: ") {
		case "response.output_text.delta":
			deltas++
		case "response.completed":
			done = true
		}
	}
	if err := sc.Err(); err != nil {
		return worst, err
	}
	if deltas != tickEvents || !done {
		return worst, fmt.Errorf("tick stream: %d deltas, completed %v; want %d and true", deltas, done, tickEvents)
	}
	return worst, nil
}

// frontSendQueue finds, in /proc/net/tcp's text, modelgate's end of the connection from the
// client port clientPort to the front listener's port, and returns its send queue.
func frontSendQueue(table string, frontPort, clientPort int) int64 {
	local, remote := fmt.Sprintf("0100007F:%04X", frontPort), fmt.Sprintf("0100007F:%04X", clientPort)
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[1] == local && f[2] == remote {
			tx, _ := strconv.ParseInt(strings.SplitN(f[4], ":", 2)[0], 16, 64)
			return tx
		}
	}
	return 0
}

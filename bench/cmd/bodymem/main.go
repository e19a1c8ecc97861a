// Command bodymem measures what a flood of request bodies costs a running modelgate's
// memory (issue 40): many connections that declare a large body, send a few bytes and stall;
// and WebSocket connections that queue large response.create messages behind a slow turn.
// It samples the process's resident memory (from /proc, so Linux only) and the
// modelgate_inflight_body_bytes gauge while it holds them, and checks that /healthz answers
// throughout. Loopback only; every count and wait is bounded by its flags.
//
//	go build -o /tmp/mg . && /tmp/mg --simulate &
//	go run ./bench/cmd/bodymem --pid $! --phase bodies
//	go run ./bench/cmd/bodymem --pid $! --phase ws
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

type options struct {
	url      string
	key      string
	pid      int
	phase    string
	conns    int
	rounds   int
	declared int
	sent     int
	hold     time.Duration
	wsConns  int
	wsMsgs   int
	wsSize   int
	wsModel  string
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "http://127.0.0.1:8080", "modelgate's base URL (loopback)")
	flag.StringVar(&o.key, "key", "sim-CHAT_APP_KEY", "a team key (--simulate's example config: team chat's)")
	flag.IntVar(&o.pid, "pid", 0, "modelgate's process id, for its resident memory")
	flag.StringVar(&o.phase, "phase", "bodies", "bodies (stalled bodies) or ws (queued WebSocket messages)")
	flag.IntVar(&o.conns, "conns", 2000, "bodies: connections that stall mid-body")
	flag.IntVar(&o.rounds, "rounds", 1, "bodies: rounds of them, one after the other (memory freed by a round is reused by the next)")
	flag.IntVar(&o.declared, "declared", 1<<20, "bodies: the Content-Length each declares")
	flag.IntVar(&o.sent, "sent", 100, "bodies: the bytes each sends before stalling")
	flag.DurationVar(&o.hold, "hold", 10*time.Second, "how long the connections are held once open")
	flag.IntVar(&o.wsConns, "ws-conns", 2, "ws: connections")
	flag.IntVar(&o.wsMsgs, "ws-msgs", 16, "ws: response.create messages each queues behind its slow turn")
	flag.IntVar(&o.wsSize, "ws-size", 8<<20, "ws: the size of each queued message")
	flag.StringVar(&o.wsModel, "ws-model", "sim-slow", "ws: the model of the slow turn")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bodymem:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	u, err := url.Parse(o.url)
	if err != nil {
		return err
	}
	if host := u.Hostname(); host != "127.0.0.1" && host != "localhost" && host != "::1" {
		return errors.New("loopback only: " + host)
	}
	if o.conns > 10000 || o.rounds > 10 || o.wsConns > 64 || o.wsMsgs > 64 || o.hold > 5*time.Minute {
		return errors.New("counts and hold are bounded: conns <= 10000, rounds <= 10, ws-conns <= 64, ws-msgs <= 64, hold <= 5m")
	}
	w := startWatch(o)
	fmt.Printf("before: rss %s, inflight gauge %s\n", mib(w.rss()), mib(w.gauge()))
	var phaseErr error
	switch o.phase {
	case "bodies":
		for range max(o.rounds, 1) {
			if phaseErr = bodies(o, u.Host, w); phaseErr != nil {
				break
			}
		}
	case "ws":
		phaseErr = sockets(o, w)
	default:
		phaseErr = errors.New("unknown phase " + o.phase)
	}
	// What is left once the clients are gone: the gauge goes back to 0.
	deadline := time.Now().Add(30 * time.Second)
	for w.gauge() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	w.stop()
	fmt.Printf("peak: rss %s (sampled; VmHWM %s), inflight gauge %s\n", mib(w.peakRSS.Load()), mib(w.hwm()), mib(w.peakGauge.Load()))
	fmt.Printf("after: rss %s, inflight gauge %s\n", mib(w.rss()), mib(w.gauge()))
	fmt.Printf("healthz: %d probes, %d failed, slowest %v\n", w.probes.Load(), w.failed.Load(), time.Duration(w.slowest.Load()))
	return phaseErr
}

// bodies opens o.conns connections that each declare o.declared bytes of chat body, send
// o.sent and stall, holds them for o.hold, then closes them.
func bodies(o options, host string, w *watch) error {
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + o.key +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(o.declared) + "\r\n\r\n"
	start := []byte(head + `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", max(o.sent-50, 0)))
	conns := make([]net.Conn, o.conns)
	var wg sync.WaitGroup
	var failed atomic.Int64
	sem := make(chan struct{}, 64)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", host, 10*time.Second)
			if err == nil {
				_, err = c.Write(start)
			}
			if err != nil {
				failed.Add(1)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	fmt.Printf("bodies: %d connections stalled after %d of %d bytes (%d failed to open); holding %v\n",
		o.conns-int(failed.Load()), len(start)-len(head), o.declared, failed.Load(), o.hold)
	time.Sleep(o.hold)
	fmt.Printf("held: rss %s, inflight gauge %s\n", mib(w.rss()), mib(w.gauge()))
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	return nil
}

// sockets opens o.wsConns WebSocket connections; each starts a slow turn and queues o.wsMsgs
// messages of o.wsSize bytes behind it, holds them for o.hold, and leaves.
func sockets(o options, w *watch) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.hold+2*time.Minute)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(o.url, "http") + "/v1/responses"
	// The slow turn's answer echoes its input word by word, one event every 50 ms.
	slow := `{"type":"response.create","model":"` + o.wsModel + `","store":false,"input":"` + strings.Repeat("slow ", 2000) + `"}`
	head := `{"type":"response.create","model":"` + o.wsModel + `","store":false,"input":"queued","instructions":"`
	big := head + strings.Repeat("a", max(o.wsSize-len(head)-2, 0)) + `"}` // o.wsSize bytes in all
	var busy, tooMany, other atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.wsConns)
	for range o.wsConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + o.key}}})
			if err != nil {
				errs <- err
				return
			}
			defer ws.CloseNow()
			ws.SetReadLimit(64 << 20)
			if err := ws.Write(ctx, websocket.MessageText, []byte(slow)); err != nil {
				errs <- err
				return
			}
			if _, _, err := ws.Read(ctx); err != nil { // the slow turn has started
				errs <- err
				return
			}
			go func() { // count the error events the queued messages get
				for {
					_, data, err := ws.Read(ctx)
					if err != nil {
						return
					}
					switch s := string(data); {
					case strings.Contains(s, `"server_busy"`):
						busy.Add(1)
					case strings.Contains(s, `"too_many_queued_responses"`):
						tooMany.Add(1)
					case strings.Contains(s, `"type":"error"`):
						other.Add(1)
					}
				}
			}()
			for range o.wsMsgs {
				if err := ws.Write(ctx, websocket.MessageText, []byte(big)); err != nil {
					errs <- err
					return
				}
			}
			time.Sleep(o.hold)
		}()
	}
	time.Sleep(o.hold / 2)
	fmt.Printf("held: rss %s, inflight gauge %s\n", mib(w.rss()), mib(w.gauge()))
	wg.Wait()
	fmt.Printf("ws: %d connections x %d messages of %s; refused: %d server_busy, %d too_many_queued, %d other errors\n",
		o.wsConns, o.wsMsgs, mib(int64(len(big))), busy.Load(), tooMany.Load(), other.Load())
	close(errs)
	return <-errs
}

// watch samples the process's resident memory and the gauge, and probes /healthz.
type watch struct {
	o         options
	client    *http.Client
	done      chan struct{}
	wg        sync.WaitGroup
	peakRSS   atomic.Int64
	peakGauge atomic.Int64
	probes    atomic.Int64
	failed    atomic.Int64
	slowest   atomic.Int64
}

func startWatch(o options) *watch {
	w := &watch{o: o, client: &http.Client{Timeout: 5 * time.Second}, done: make(chan struct{})}
	w.peakGauge.Store(-1)
	w.wg.Add(2)
	go w.every(50*time.Millisecond, func() {
		w.peakRSS.Store(max(w.peakRSS.Load(), w.rss()))
		w.peakGauge.Store(max(w.peakGauge.Load(), w.gauge()))
	})
	go w.every(100*time.Millisecond, w.probe)
	return w
}

func (w *watch) every(d time.Duration, f func()) {
	defer w.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-w.done:
			return
		case <-t.C:
		}
	}
}

func (w *watch) stop() { close(w.done); w.wg.Wait() }

func (w *watch) probe() {
	start := time.Now()
	resp, err := w.client.Get(w.o.url + "/healthz")
	w.probes.Add(1)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		w.failed.Add(1)
		return
	}
	took := int64(time.Since(start))
	for cur := w.slowest.Load(); took > cur && !w.slowest.CompareAndSwap(cur, took); cur = w.slowest.Load() {
	}
}

// gauge reads modelgate_inflight_body_bytes from /metrics; -1 when it is not there (a
// modelgate without it).
func (w *watch) gauge() int64 {
	resp, err := w.client.Get(w.o.url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "modelgate_inflight_body_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int64(f)
		}
	}
	return -1
}

func (w *watch) rss() int64 { return w.status("VmRSS:") }
func (w *watch) hwm() int64 { return w.status("VmHWM:") }

// status reads a kB figure of /proc/<pid>/status, in bytes; -1 without a pid.
func (w *watch) status(field string) int64 {
	if w.o.pid <= 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(w.o.pid) + "/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}

func mib(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

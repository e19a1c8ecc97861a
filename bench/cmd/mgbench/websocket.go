package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The websocket phase (issue 29) compares the Responses WebSocket mode with the same work over
// HTTP, through the same modelgate: the per-event delay of timestamped streams, an agent loop
// of loopTurns turns (bytes the client sends, and the loop's time), and the memory of idle
// connections.

const (
	loopTurns = 20
	idleConns = 1000
)

// toolResult is what each turn of the loop adds: a tool's output of about 1 KB, as an agent
// reading files or running commands sends back.
var toolResult = strings.Repeat("line of tool output: ok; ", 40)

type wsDelayCase struct {
	name     string
	p50, p99 []float64
}

type wsLoopCase struct {
	httpBytes, wsBytes         []int64 // the client's bytes over the whole loop, per round
	httpLast, wsLast           []int64 // the client's bytes of the last turn
	httpSeconds, wsSeconds     []float64
	idleBase, idlePeak, idleOf []int64
}

func (b *bench) websocketPhase() error {
	wsURL := strings.Replace(b.mg.url, "http", "ws", 1) + "/v1/responses"
	sse := target{name: "modelgate /v1/responses (SSE)", url: b.mg.url + "/v1/responses", key: benchKey, body: ticksBody}
	delays := []*wsDelayCase{{name: sse.name}, {name: "modelgate /v1/responses (WebSocket)"}}
	loop := &wsLoopCase{}
	for round := range b.o.rounds {
		err := inTurn(round, func() error {
			ds, err := eventDelays(sse, b.o.tickStreams)
			if err == nil {
				delays[0].add(ds)
			}
			return err
		}, func() error {
			ds, err := wsEventDelays(wsURL, b.o.tickStreams)
			if err == nil {
				delays[1].add(ds)
			}
			return err
		})
		if err != nil {
			return err
		}
		if err := inTurn(round, func() error { return loop.httpLoop(b.mg.url + "/v1/responses") },
			func() error { return loop.wsLoop(wsURL) }); err != nil {
			return err
		}
	}
	base, peak, err := idleSocketsRSS(b.mg.pid(), wsURL, idleConns)
	if err != nil {
		return err
	}
	loop.idleBase, loop.idlePeak = append(loop.idleBase, base), append(loop.idlePeak, peak)
	b.rep.wsDelays, b.rep.wsLoop = delays, loop
	return nil
}

func (c *wsDelayCase) add(ds []time.Duration) {
	c.p50 = append(c.p50, us(percentile(ds, 50)))
	c.p99 = append(c.p99, us(percentile(ds, 99)))
}

// dialBench opens a WebSocket to url with the bench key.
func dialBench(ctx context.Context, url string) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + benchKey}}})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	return ws, nil
}

// wsEventDelays is eventDelays over k WebSocket connections, each running one bench-ticks
// turn.
func wsEventDelays(url string, k int) ([]time.Duration, error) {
	create, _ := sjson.SetBytes(ticksBody, "type", "response.create")
	return gatherDelays("websocket", k, func() ([]time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ws, err := dialBench(ctx, url)
		if err != nil {
			return nil, err
		}
		defer ws.CloseNow()
		if err := ws.Write(ctx, websocket.MessageText, create); err != nil {
			return nil, err
		}
		// Reads take no deadline of their own: the library would register one per read,
		// which an SSE client's reads do not pay, and the delay measured is modelgate's. The
		// minute's bound closes the connection instead.
		stop := context.AfterFunc(ctx, func() { ws.CloseNow() })
		defer stop()
		var mine []time.Duration
		var buf bytes.Buffer // reused, as the SSE client's bufio reader reuses its buffer
		for {
			_, r, err := ws.Reader(context.Background())
			if err == nil {
				buf.Reset()
				_, err = buf.ReadFrom(r)
			}
			now := time.Now()
			if err != nil {
				return nil, err
			}
			data := buf.Bytes()
			if stamp, ok := tickStamp(data, target{}); ok {
				mine = append(mine, now.Sub(time.Unix(0, stamp)))
			}
			if typ := gjson.GetBytes(data, "type").Str; typ == "response.completed" || typ == "error" || typ == "response.failed" {
				return mine, nil
			}
		}
	})
}

// loopItem is the new input of turn i: a tool's result.
func loopItem(i int) string {
	return fmt.Sprintf(`{"role":"user","content":"result of tool call %d: %s"}`, i, toolResult)
}

// httpLoop runs the agent loop over HTTP as a client without stored responses must: every
// turn sends the whole conversation so far, its own earlier outputs included.
func (c *wsLoopCase) httpLoop(url string) error {
	client := &http.Client{}
	defer client.CloseIdleConnections()
	items := []string{}
	var total, last int64
	start := time.Now()
	for i := range loopTurns {
		items = append(items, loopItem(i))
		body := []byte(`{"model":"bench-fast","stream":true,"store":false,"input":[` + strings.Join(items, ",") + `]}`)
		total, last = total+int64(len(body)), int64(len(body))
		resp, err := post(context.Background(), client, target{name: "http loop", url: url, key: benchKey, body: body})
		if err != nil {
			return err
		}
		output, err := streamOutput(resp)
		if err != nil {
			return err
		}
		if inner := strings.TrimSpace(output[1 : len(output)-1]); inner != "" {
			items = append(items, inner)
		}
	}
	c.httpSeconds = append(c.httpSeconds, time.Since(start).Seconds())
	c.httpBytes, c.httpLast = append(c.httpBytes, total), append(c.httpLast, last)
	return nil
}

// streamOutput reads an SSE answer to its response.completed and returns the output items.
func streamOutput(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("http loop: status %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		ev, err := readEvent(br)
		if err != nil {
			return "", fmt.Errorf("http loop: no response.completed: %w", err)
		}
		if i := bytes.Index(ev, []byte("data: ")); i >= 0 && bytes.Contains(ev, []byte(`"response.completed"`)) {
			out := gjson.GetBytes(bytes.TrimSpace(ev[i+6:]), "response.output")
			if !out.IsArray() {
				return "", fmt.Errorf("http loop: response.completed without output")
			}
			return out.Raw, nil
		}
	}
}

// wsLoop runs the same loop over one WebSocket: each turn sends only its new item and the
// previous response's id; modelgate expands the chain it keeps on the connection.
func (c *wsLoopCase) wsLoop(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	ws, err := dialBench(ctx, url)
	if err != nil {
		return err
	}
	defer ws.CloseNow()
	var total, last int64
	prev := ""
	for i := range loopTurns {
		msg := `{"type":"response.create","model":"bench-fast","store":false,"input":[` + loopItem(i) + `]`
		if prev != "" {
			msg += `,"previous_response_id":"` + prev + `"`
		}
		msg += "}"
		total, last = total+int64(len(msg)), int64(len(msg))
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			return err
		}
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return err
			}
			typ := gjson.GetBytes(data, "type").Str
			if typ == "error" || typ == "response.failed" {
				return fmt.Errorf("websocket loop turn %d: %s", i, data)
			}
			if typ == "response.completed" {
				prev = gjson.GetBytes(data, "response.id").Str
				break
			}
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
	c.wsSeconds = append(c.wsSeconds, time.Since(start).Seconds())
	c.wsBytes, c.wsLast = append(c.wsBytes, total), append(c.wsLast, last)
	return nil
}

// idleSocketsRSS opens n WebSocket connections that send nothing and returns modelgate's RSS
// before and with them all open.
func idleSocketsRSS(pid int, url string, n int) (base, peak int64, err error) {
	runtimeSettle()
	if base, err = rssBytes(pid); err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conns := make([]*websocket.Conn, 0, n)
	defer func() {
		for _, ws := range conns {
			ws.CloseNow()
		}
	}()
	for range n {
		ws, err := dialBench(ctx, url)
		if err != nil {
			return 0, 0, fmt.Errorf("idle sockets: %d open, then %w", len(conns), err)
		}
		conns = append(conns, ws)
	}
	runtimeSettle()
	for range 10 {
		if r, err := rssBytes(pid); err == nil && r > peak {
			peak = r
		}
		time.Sleep(100 * time.Millisecond)
	}
	return base, peak, nil
}

// printWebSocket reports the websocket phase.
func printWebSocket(w interface{ Write([]byte) (int, error) }, delays []*wsDelayCase, l *wsLoopCase) {
	fmt.Fprintln(w, "Responses WebSocket mode vs HTTP (same modelgate)\tp50 µs\tp99 µs\tWS/SSE p99\ttarget <= 1.10\t\t\t")
	sseP99 := median(delays[0].p99)
	for i, d := range delays {
		ratio, v := "", ""
		if i > 0 {
			r := median(d.p99) / sseP99
			ratio, v = fmt.Sprintf("%.2f", r), verdict(r <= 1.10)
		}
		fmt.Fprintf(w, "per-event delay, %s\t%.0f\t%.0f\t%s\t%s\t\t\t\n", d.name, median(d.p50), median(d.p99), ratio, v)
	}
	hb, wb := medianInt(l.httpBytes), medianInt(l.wsBytes)
	hl, wl := medianInt(l.httpLast), medianInt(l.wsLast)
	fmt.Fprintf(w, "%d-turn agent loop, bytes the client sends\tHTTP %d\tWebSocket %d\t%.1fx fewer\tturn %d: %.1fx fewer\t%s\t\t\n",
		loopTurns, hb, wb, float64(hb)/float64(wb), loopTurns, float64(hl)/float64(wl), verdict(float64(hl)/float64(wl) >= 5))
	hs, ws := median(l.httpSeconds), median(l.wsSeconds)
	fmt.Fprintf(w, "%d-turn agent loop, end to end\tHTTP %.1f ms\tWebSocket %.1f ms\tWS/HTTP %.2f\t\t\t\t\n", loopTurns, hs*1000, ws*1000, ws/hs)
	per := (medianInt(l.idlePeak) - medianInt(l.idleBase)) / idleConns
	fmt.Fprintf(w, "%d idle WebSocket connections\tRSS before %s\tRSS with them %s\t%.1f KB each\ttarget < 32 KB\t%s\t\t\n",
		idleConns, mb(medianInt(l.idleBase)), mb(medianInt(l.idlePeak)), float64(per)/1024, verdict(per < 32<<10))
	fmt.Fprintln(w, "\t\t\t\t\t\t\t")
}

func medianInt(xs []int64) int64 { return medianBytes(xs) }

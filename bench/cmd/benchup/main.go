// Command benchup is the benchmark's upstream: the simulated platform in minimal mode for
// throughput and latency, a paced stream for holding many streams open, and a "ticks" stream
// whose deltas carry the upstream's send time, for per-event delay through a proxy.
//
// The request's model picks the behaviour: bench-slow is a long paced stream (every
// --slow-delay, for --slow-events deltas), bench-ticks is the timestamped stream, bench-flood
// sends 16 KB deltas as fast as the reader (and HTTP/2 flow control) lets it for --flood-for,
// anything else is the minimal answer; every /api/open/v2 route is the full simulator.
// POST /v1/traces takes OTLP/HTTP trace exports and drops them.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/bench/benchserve"
	"modelgate/platformsim"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address (loopback)")
	slowDelay := flag.Duration("slow-delay", time.Second, "pause between events of bench-slow streams")
	ticks := flag.Int("ticks", 200, "delta events in a bench-ticks stream")
	tickGap := flag.Duration("tick-gap", 2*time.Millisecond, "pause between bench-ticks deltas")
	slowEvents := flag.Int("slow-events", 600, "delta events in a bench-slow stream (at the default --slow-delay, 10 minutes)")
	floodFor := flag.Duration("flood-for", time.Minute, "how long a bench-flood stream goes on")
	var proto benchserve.Protocol
	proto.Flags(flag.CommandLine)
	flag.Parse()

	h := &dispatch{
		fast:    platformsim.New(platformsim.Options{Minimal: true}),
		full:    platformsim.New(platformsim.Options{}),
		ticks:   *ticks,
		tickGap: *tickGap,
		slow:    *slowEvents, slowGap: *slowDelay,
		floodFor: *floodFor,
	}
	benchserve.Run(*listen, h, proto)
}

type dispatch struct {
	fast, full *platformsim.Sim
	ticks      int
	tickGap    time.Duration
	slow       int
	slowGap    time.Duration
	floodFor   time.Duration
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (d *dispatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/traces" {
		// The tracing phase's OTLP/HTTP collector: each export is read and dropped.
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		return
	}
	if r.URL.Path != "/v1/responses" {
		d.full.ServeHTTP(w, r)
		return
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodyPool.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, 32<<20)); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	body := buf.Bytes()
	switch gjson.GetBytes(body, "model").Str {
	case "bench-ticks":
		serveStream(w, r, "bench-ticks", d.ticks, d.tickGap, func(int) string {
			return "T" + strconv.FormatInt(time.Now().UnixNano(), 10) + ";"
		})
		return
	case "bench-slow":
		serveStream(w, r, "bench-slow", d.slow, d.slowGap, func(int) string { return "word " })
		return
	case "bench-flood":
		flood := strings.Repeat("x", floodDelta)
		until := time.Now().Add(d.floodFor)
		serveStream(w, r, "bench-flood", math.MaxInt, 0, func(int) string {
			if time.Now().After(until) {
				return ""
			}
			return flood
		})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	d.fast.ServeHTTP(&freshID{ResponseWriter: w, id: nextID()}, r)
}

// minimalID is the response id the simulator's minimal answer always carries. A platform
// gives every response an id of its own, and modelgate keeps each response under its id
// (responses.store: local), so benchup swaps in a fresh one per answer: otherwise only the
// first answer would be kept and the benchmark would price refusing repeated ids, not
// keeping responses.
var minimalID = []byte("resp_minimal")

var idSeq atomic.Int64

// nextID is a fresh id of minimalID's length, so a Content-Length stays right.
func nextID() []byte {
	return []byte("r" + strconv.FormatInt(10_000_000_000+idSeq.Add(1)%90_000_000_000, 10))
}

// freshID replaces minimalID by id in everything written through it.
type freshID struct {
	http.ResponseWriter
	id []byte
}

func (w *freshID) Write(p []byte) (int, error) {
	if bytes.Contains(p, minimalID) {
		if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(p, minimalID, w.id)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.NewResponseController reach the connection's Flush.
func (w *freshID) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *freshID) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// floodDelta is the size of a bench-flood delta.
const floodDelta = 16 << 10

// serveStream streams a well-formed Responses stream of up to n deltas, gap apart, each
// delta(i) made just before it is written, so bench-ticks stamps its send time. An empty
// delta ends the stream early. The stream stops when the client leaves.
func serveStream(w http.ResponseWriter, r *http.Request, model string, n int, gap time.Duration, delta func(i int) string) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	seq := 0
	send := func(typ, data string) bool {
		frame := "event: " + typ + "\ndata: " + data + "\n\n"
		if _, err := io.WriteString(w, frame); err != nil {
			return false
		}
		seq++
		return rc.Flush() == nil
	}
	resp := `{"id":"resp_` + model + `","object":"response","created_at":0,"status":"%s","model":"` + model + `","output":[],"usage":%s}`
	if !send("response.created", `{"type":"response.created","sequence_number":0,"response":`+fmt.Sprintf(resp, "in_progress", "null")+`}`) ||
		!send("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_t","status":"in_progress","role":"assistant","content":[]}}`) ||
		!send("response.content_part.added", `{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_t","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}`) {
		return
	}
	var tick <-chan time.Time
	if gap > 0 {
		t := time.NewTicker(gap)
		defer t.Stop()
		tick = t.C
	}
	sent := 0
	for i := range n {
		if tick != nil {
			select {
			case <-r.Context().Done():
				return
			case <-tick:
			}
		} else if r.Context().Err() != nil {
			return
		}
		d := delta(i)
		if d == "" {
			break
		}
		if !send("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":`+strconv.Itoa(seq)+
			`,"item_id":"msg_t","output_index":0,"content_index":0,"delta":"`+d+`","logprobs":[]}`) {
			return
		}
		sent++
	}
	out := strconv.Itoa(sent)
	item := `{"type":"message","id":"msg_t","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"done"}]}`
	_ = send("response.output_text.done", `{"type":"response.output_text.done","sequence_number":`+strconv.Itoa(seq)+`,"item_id":"msg_t","output_index":0,"content_index":0,"text":"done"}`) &&
		send("response.content_part.done", `{"type":"response.content_part.done","sequence_number":`+strconv.Itoa(seq)+`,"item_id":"msg_t","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":"done"}}`) &&
		send("response.output_item.done", `{"type":"response.output_item.done","sequence_number":`+strconv.Itoa(seq)+`,"output_index":0,"item":`+item+`}`) &&
		send("response.completed", `{"type":"response.completed","sequence_number":`+strconv.Itoa(seq)+`,"response":`+
			fmt.Sprintf(resp, "completed", `{"input_tokens":1,"output_tokens":`+out+`,"total_tokens":`+strconv.Itoa(sent+1)+`}`)+`}`)
}

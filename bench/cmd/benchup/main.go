// Command benchup is the benchmark's upstream: the simulated platform in minimal mode for
// throughput and latency, a paced stream for holding many streams open, and a "ticks" stream
// whose deltas carry the upstream's send time, for per-event delay through a proxy.
//
// The request's model picks the behaviour: bench-slow is a slow stream (and every
// /api/open/v2 route is the full simulator), bench-ticks is the timestamped stream, anything
// else is the minimal answer. POST /v1/traces takes OTLP/HTTP trace exports and drops them.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
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
	var proto benchserve.Protocol
	proto.Flags(flag.CommandLine)
	flag.Parse()

	h := &dispatch{
		fast:    platformsim.New(platformsim.Options{Minimal: true}),
		full:    platformsim.New(platformsim.Options{EventDelay: *slowDelay}),
		ticks:   *ticks,
		tickGap: *tickGap,
	}
	benchserve.Run(*listen, h, proto)
}

type dispatch struct {
	fast, full *platformsim.Sim
	ticks      int
	tickGap    time.Duration
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
		d.serveTicks(w, r)
		return
	case "bench-slow":
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.full.ServeHTTP(w, r)
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

// serveTicks streams a well-formed Responses stream whose every delta is "T<unix nanos>;",
// stamped just before the write, so a client can tell how long each event took to reach it.
func (d *dispatch) serveTicks(w http.ResponseWriter, r *http.Request) {
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
	const resp = `{"id":"resp_ticks","object":"response","created_at":0,"status":"%s","model":"bench-ticks","output":[],"usage":%s}`
	if !send("response.created", `{"type":"response.created","sequence_number":0,"response":`+fmt.Sprintf(resp, "in_progress", "null")+`}`) ||
		!send("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_t","status":"in_progress","role":"assistant","content":[]}}`) ||
		!send("response.content_part.added", `{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_t","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}`) {
		return
	}
	t := time.NewTimer(d.tickGap)
	defer t.Stop()
	for range d.ticks {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		t.Reset(d.tickGap)
		stamp := strconv.FormatInt(time.Now().UnixNano(), 10)
		if !send("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":`+strconv.Itoa(seq)+
			`,"item_id":"msg_t","output_index":0,"content_index":0,"delta":"T`+stamp+`;","logprobs":[]}`) {
			return
		}
	}
	n := strconv.Itoa(d.ticks)
	item := `{"type":"message","id":"msg_t","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"ticks"}]}`
	_ = send("response.output_text.done", `{"type":"response.output_text.done","sequence_number":`+strconv.Itoa(seq)+`,"item_id":"msg_t","output_index":0,"content_index":0,"text":"ticks"}`) &&
		send("response.content_part.done", `{"type":"response.content_part.done","sequence_number":`+strconv.Itoa(seq)+`,"item_id":"msg_t","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":"ticks"}}`) &&
		send("response.output_item.done", `{"type":"response.output_item.done","sequence_number":`+strconv.Itoa(seq)+`,"output_index":0,"item":`+item+`}`) &&
		send("response.completed", `{"type":"response.completed","sequence_number":`+strconv.Itoa(seq)+`,"response":`+
			fmt.Sprintf(resp, "completed", `{"input_tokens":1,"output_tokens":`+n+`,"total_tokens":`+strconv.Itoa(d.ticks+1)+`}`)+`}`)
}

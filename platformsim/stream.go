package platformsim

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/tmaxmax/go-sse"
)

// answer is what a route decided to send; send puts it on the wire with any scripted fault.
type answer struct {
	status     int
	header     http.Header
	body       []byte
	events     []Event       // non-nil: an SSE stream
	eventDelay time.Duration // default pause between events (sim-slow)
	bill       *bill         // nil: nothing charged
	// stall (sim-stall): once its events are sent (a plain answer: before its headers),
	// wait until the client leaves.
	stall bool
}

// bill is what the platform charges for a generated answer. A plain body is charged in full;
// a stream is charged input up front and one output token per delta event flushed.
type bill struct {
	key           string
	requestID     string // the call's X-Request-Id, for BilledFor
	input, output int64
}

// deltaTypes are the events that count one output token each.
var deltaTypes = map[string]bool{
	"response.output_text.delta":             true,
	"response.refusal.delta":                 true,
	"response.reasoning_summary_text.delta":  true,
	"response.reasoning_text.delta":          true,
	"response.function_call_arguments.delta": true,
	"response.custom_tool_call_input.delta":  true,
}

// send writes a, shaped by the scripted reply rep (its Delay and Fault).
func (s *Sim) send(w http.ResponseWriter, r *http.Request, a answer, rep Reply) {
	ctx := r.Context()
	if a.bill != nil {
		a.bill.requestID = r.Header.Get("X-Request-Id")
	}
	if !s.wait(ctx, rep.Delay) {
		return
	}
	if a.stall && a.events == nil {
		s.stall(ctx)
		return
	}
	switch rep.Fault {
	case FaultStallBeforeHeaders:
		s.stall(ctx)
		return
	case FaultStallAfterBilling:
		if a.bill != nil {
			out := a.bill.output // a plain body is generated whole before its headers
			if a.events != nil {
				out = 0 // a stream bills as it goes: only its input so far
			}
			s.charge(a.bill, 1, a.bill.input, out)
		}
		s.stall(ctx)
		return
	}
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	for k, v := range rep.Header {
		h.Set(k, v)
	}
	if a.events != nil {
		s.sendStream(w, r, a, rep)
		return
	}
	s.sendBody(w, r, a, rep)
}

func (s *Sim) sendBody(w http.ResponseWriter, r *http.Request, a answer, rep Reply) {
	if a.bill != nil {
		s.charge(a.bill, 1, a.bill.input, a.bill.output)
	}
	h := w.Header()
	if h.Get("Content-Type") == "" && len(a.body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	body := a.body
	switch rep.Fault {
	case FaultInvalidJSON:
		body = brokenJSON(body)
		a.status = http.StatusOK
	case FaultGarbage:
		body = garbage
	case FaultDeepNesting:
		body = deepBody(body)
	case FaultNoUsage:
		body = withoutUsage(body, "usage")
	case FaultTruncate:
		w.WriteHeader(a.status)
		_, _ = w.Write(body[:len(body)/2])
		return
	case FaultResetMidStream, FaultStallMidStream:
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(a.status)
		_, _ = w.Write(body[:len(body)/2])
		_ = http.NewResponseController(w).Flush()
		if rep.Fault == FaultStallMidStream {
			s.stall(r.Context())
			return
		}
		resetConn(w)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(body)
}

func (s *Sim) sendStream(w http.ResponseWriter, r *http.Request, a answer, rep Reply) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	h := w.Header()
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
	}
	h.Set("Cache-Control", "no-cache")
	h.Del("Content-Length")
	w.WriteHeader(a.status)
	if rc.Flush() != nil {
		return
	}
	if a.bill != nil {
		s.charge(a.bill, 1, a.bill.input, 0)
	}
	pause := a.eventDelay
	if s.opts.EventDelay > 0 {
		pause = s.opts.EventDelay
	}
	cut := streamCut(rep.Fault, rep.AfterEvents, len(a.events))
	var buf bytes.Buffer // one per stream: each event is framed into it, then written at once
	for i, ev := range a.events {
		if i == cut && rep.Fault == FaultDeepNesting {
			if _, err := w.Write(deepEvent()); err != nil || rc.Flush() != nil {
				return
			}
		} else if i == cut {
			break
		}
		d := ev.Delay
		if i > 0 {
			d += pause
		}
		if rep.Silence > 0 && i == max(rep.AfterEvents, 0) {
			d += rep.Silence
		}
		if !s.wait(ctx, d) {
			return
		}
		if rep.Fault == FaultNoUsage {
			ev.Data = string(withoutUsage([]byte(ev.Data), "response.usage"))
		}
		if writeEvent(w, &buf, ev) != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		if a.bill != nil && deltaTypes[ev.Type] {
			s.charge(a.bill, 0, 0, 1)
		}
	}
	if a.stall {
		s.stall(ctx)
		return
	}
	switch rep.Fault {
	case FaultResetMidStream:
		resetConn(w)
	case FaultStallMidStream:
		s.stall(ctx)
	case FaultGarbage:
		_, _ = w.Write(garbage)
		_ = rc.Flush()
	case FaultInvalidJSON:
		_, _ = w.Write([]byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\n\n"))
		_ = rc.Flush()
	}
}

// writeEvent frames ev with go-sse, the design's SSE library, and writes it to w in one
// write. buf is the stream's, reused from event to event. go-sse starts a data line at every
// line break a client honours (LF, CRLF, a lone CR), so a client reads back the Data that was
// scripted. A Type with a line break cannot be framed: the error ends the stream there. The
// faults that put broken frames on the wire on purpose write them by hand (faults.go).
func writeEvent(w io.Writer, buf *bytes.Buffer, ev Event) error {
	var msg sse.Message
	if ev.Type != "" {
		typ, err := sse.NewType(ev.Type)
		if err != nil {
			return err
		}
		msg.Type = typ
	}
	msg.AppendData(ev.Data)
	buf.Reset()
	if _, err := msg.WriteTo(buf); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Totals is what the platform charged.
type Totals struct {
	Requests                  int
	InputTokens, OutputTokens int64
}

func (s *Sim) charge(b *bill, requests int, input, output int64) {
	s.mu.Lock()
	t := s.totals[b.key]
	t.Requests += requests
	t.InputTokens += input
	t.OutputTokens += output
	s.totals[b.key] = t
	if b.requestID != "" && !s.opts.Minimal {
		r := s.billed[b.requestID]
		r.Requests += requests
		r.InputTokens += input
		r.OutputTokens += output
		s.billed[b.requestID] = r
	}
	s.mu.Unlock()
}

// BilledFor returns what was charged for the calls that carried X-Request-Id id (several when
// a gateway fans one request out), so a test can reconcile a gateway's figures call by call.
func (s *Sim) BilledFor(id string) Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.billed[id]
}

// Billed returns what was charged per X-Request-Id, for calls that carried one.
func (s *Sim) Billed() map[string]Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.billed)
}

// Totals returns the usage charged to one platform API key.
func (s *Sim) Totals(apiKey string) Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals[apiKey]
}

// AllTotals returns the usage charged to every key together.
func (s *Sim) AllTotals() Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum Totals
	for _, t := range s.totals {
		sum.Requests += t.Requests
		sum.InputTokens += t.InputTokens
		sum.OutputTokens += t.OutputTokens
	}
	return sum
}

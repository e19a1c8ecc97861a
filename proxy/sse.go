package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/platform"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// maxEventSize bounds one upstream SSE event. response.completed repeats the whole output, so
// it can be many megabytes; the reader's 64 KiB default would cut real answers.
const maxEventSize = 64 << 20

// idleTimer ends the upstream call when the platform sent nothing for too long while
// modelgate waited for it. Only time spent waiting in a read counts: a relay blocked writing
// to a slow client is not a silent platform, and cutting it would drop events the platform
// already sent and billed. Resetting a timer on every read costs more than the read itself,
// so a read only notes the time; when the timer fires it re-arms itself for what is left of
// the window, and only a real silence cancels.
type idleTimer struct {
	t       *time.Timer
	d       time.Duration
	last    atomic.Int64 // monoNow of the start of the current wait (or of the timer)
	waiting atomic.Bool  // a read from the upstream is under way
	fired   atomic.Bool
	mu      sync.Mutex // orders expiry against stop, off the read path
	stopped bool
}

// monoBase anchors monoNow: time.Since reads the monotonic clock, immune to wall-clock steps.
var monoBase = time.Now()

func monoNow() int64 { return int64(time.Since(monoBase)) }

func newIdleTimer(d time.Duration, cancel context.CancelFunc) *idleTimer {
	it := &idleTimer{d: d}
	if d > 0 {
		it.last.Store(monoNow())
		it.t = time.AfterFunc(d, func() { it.expire(cancel) })
	}
	return it
}

func (it *idleTimer) expire(cancel context.CancelFunc) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.stopped {
		return
	}
	if !it.waiting.Load() {
		// The relay is busy with what it read (writing to the client): the silence, if any,
		// is counted from its next read.
		it.t.Reset(it.d)
		return
	}
	if quiet := time.Duration(monoNow() - it.last.Load()); quiet < it.d {
		it.t.Reset(it.d - quiet)
		return
	}
	it.fired.Store(true)
	cancel()
}

// beginWait notes that a read from the upstream starts: the silence is measured from here,
// since the previous read returned whatever had arrived.
func (it *idleTimer) beginWait() {
	if it.t != nil {
		it.last.Store(monoNow())
		it.waiting.Store(true)
	}
}

// endWait notes that a read returned, with bytes or not.
func (it *idleTimer) endWait() {
	if it.t != nil {
		it.waiting.Store(false)
	}
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.mu.Lock()
		it.stopped = true
		it.t.Stop()
		it.mu.Unlock()
	}
}

// streamWriter is how bytes reach a streaming client once the stream started. Events are
// queued as they complete and flushed whenever the relay is about to wait for the upstream,
// so an event is never held back, and events that arrived together leave in one write. With
// keep-alive on, an SSE comment goes out whenever nothing was written for the interval, so
// idle-cutting front proxies and clients keep the stream open while the model thinks. The
// timer's comment and the handler's events then share one lock, so a comment never lands
// inside an event, and nothing is written once stop returned; without keep-alive the handler
// is the only writer and takes no lock.
type streamWriter struct {
	mu      sync.Mutex
	w       gin.ResponseWriter
	every   time.Duration
	timer   *time.Timer
	last    time.Time
	stopped bool
	pending bool   // written but not yet flushed
	err     error  // the first failed write: the client is gone
	frame   []byte // the dialect's keep-alive, whole SSE frame(s)
}

// keepAliveComment is the OpenAI dialects' keep-alive: an SSE comment, which every SSE
// parser (the official SDKs included) drops without surfacing an event.
var keepAliveComment = []byte(": keep-alive\n\n")

// newStreamWriter is a streamWriter whose keep-alive is an SSE comment (chat, Responses).
func newStreamWriter(w gin.ResponseWriter, every time.Duration) *streamWriter {
	return newStreamWriterFrame(w, every, keepAliveComment)
}

// newStreamWriterFrame is a streamWriter whose keep-alive is frame: a dialect whose clients
// expect a keep-alive event of their own (Anthropic's "event: ping") passes it here. frame
// must be one or more complete SSE events or comments, ending in a blank line.
func newStreamWriterFrame(w gin.ResponseWriter, every time.Duration, frame []byte) *streamWriter {
	sw := &streamWriter{w: w, every: every, frame: frame}
	if every > 0 {
		sw.last = time.Now()
		sw.timer = time.AfterFunc(every, sw.keepAlive)
	}
	return sw
}

// write sends p and flushes. An error means the client is gone; later writes are skipped.
func (sw *streamWriter) write(p []byte) error {
	return sw.send(p, true)
}

// queue sends p without flushing; flush (or the next write) pushes it out.
func (sw *streamWriter) queue(p []byte) error {
	return sw.send(p, false)
}

func (sw *streamWriter) send(p []byte, flush bool) error {
	if sw.timer == nil {
		return sw.sendLocked(p, flush)
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.sendLocked(p, flush)
}

func (sw *streamWriter) sendLocked(p []byte, flush bool) error {
	if sw.err != nil || sw.stopped {
		return sw.err
	}
	if _, err := sw.w.Write(p); err != nil {
		sw.err = err
		return err
	}
	sw.pending = true
	if flush {
		sw.flushLocked()
	}
	return nil
}

// flush pushes queued bytes to the client.
func (sw *streamWriter) flush() {
	if sw.timer == nil {
		sw.flushLocked()
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.flushLocked()
}

func (sw *streamWriter) flushLocked() {
	if !sw.pending || sw.err != nil {
		return
	}
	sw.w.Flush()
	sw.pending = false
	if sw.every > 0 {
		sw.last = time.Now()
	}
}

func (sw *streamWriter) keepAlive() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.stopped || sw.err != nil {
		return
	}
	if idle := time.Since(sw.last); idle < sw.every {
		sw.timer.Reset(sw.every - idle)
		return
	}
	if sw.sendLocked(sw.frame, true) == nil {
		sw.timer.Reset(sw.every)
	}
}

// stop ends keep-alives; it returns once no comment is being written.
func (sw *streamWriter) stop() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.stopped = true
	if sw.timer != nil {
		sw.timer.Stop()
	}
}

// startStream commits the answer as a 200 event stream. Everything that had to be said in
// headers (request id, rate-limit headers) has been set before this point.
//
// The headers go out here, through net/http's chunkWriter.writeHeader (a 2.8 KB frame) and a
// sort of the header keys: about 4 KB of stack below this call. The handler's goroutine runs on
// 8 KB by then; if the frames above this call leave too little of it, the stack doubles to 16 KB
// and stays so for the stream's whole life: 8 KB more per open stream, which costs about 55 KB
// in all. So the frames between the handler and this call are kept small: checks and
// admission run in calls that return before it (checkChat, admitResponses, checkMessages),
// and the relay loops are entered after it. TestOpenStreamStack holds each route to this;
// bench/tools/stackgrowth.py shows a chain that grows the stack of a running binary.
func startStream(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // ask nginx-like front proxies not to buffer
	c.Writer.WriteHeader(http.StatusOK)
	c.Writer.Flush()
}

// isCountedDelta reports whether an upstream event type is a delta the platform bills as
// output; a stream cut short is charged one token for each (see package tokens).
func isCountedDelta(typ string) bool {
	switch typ {
	case "response.output_text.delta", "response.refusal.delta",
		"response.reasoning_summary_text.delta", "response.reasoning_text.delta",
		"response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		return true
	}
	return false
}

// forwardResponsesStream relays a Responses event stream, each event byte for byte and
// flushed as soon as it is complete, and reads the terminal event's usage on the side. An
// event is checked before it is passed on: if the upstream stops speaking SSE (garbage,
// data that is not JSON) or ends without a terminal event, the client gets an error event
// rather than the garbage or a silent truncation. An event is counted before it is written:
// the platform billed it whether or not the client is still there to take it.
func (s *Server) forwardResponsesStream(c *gin.Context, st *state, resp *http.Response, reserve ratelimit.Usage, cancel context.CancelFunc) accounting.Charge {
	startStream(c) // above the relay's frame (see startStream)
	return s.relayResponsesStream(c, st, resp, reserve, cancel)
}

// relayResponsesStream is forwardResponsesStream's relay, entered once the stream started.
//
//go:noinline
func (s *Server) relayResponsesStream(c *gin.Context, st *state, resp *http.Response, reserve ratelimit.Usage, cancel context.CancelFunc) accounting.Charge {
	ri := info(c)
	if s.hooks.StreamOpened != nil {
		s.hooks.StreamOpened(ri.route)
		defer s.hooks.StreamClosed(ri.route)
	}
	sw := newStreamWriter(c.Writer, st.cfg.Upstream.KeepAliveInterval)
	defer sw.stop()
	idle := newIdleTimer(st.cfg.Upstream.StreamIdleTimeout, cancel)
	defer idle.stop()
	events := newEventReader(&idleReader{r: resp.Body, idle: idle}, maxEventSize)
	defer events.release()
	events.beforeWait = sw.flush

	r := &relayed{reserve: reserve}
	for !r.terminal {
		ev, err := events.next()
		if err != nil {
			r.readErr = err
			break
		}
		if ev.malformed {
			r.invalid = true
			break
		}
		if ev.data != nil {
			if r.check = translate.CheckJSON(ev.data); r.check != translate.JSONValid {
				r.invalid = true
				break
			}
		}
		r.count(ev)
		if r.terminal && ri.trace != nil {
			ri.traceTerminal(ev.data)
		}
		if ri.onResponse != nil {
			observeTerminal(ri, ev) // kept before the client can name it in its next turn
		}
		if sw.queue(ev.raw) != nil {
			break
		}
		ri.traceRelayed()
		if ri.ttfb == 0 {
			ri.ttfb = time.Since(ri.start)
		}
	}
	sw.flush()
	return r.end(c, resp, events, sw, idle, cancel)
}

// relayed is what a Responses relay counted of the events it read. It lives on the heap,
// and its bookkeeping in calls of their own, so the loop that holds a stream open keeps a
// small frame (see checkResponsesRequest).
type relayed struct {
	reserve  ratelimit.Usage
	deltas   int64
	terminal bool
	reported bool            // the terminal event carried the platform's usage
	usage    ratelimit.Usage // that usage
	invalid  bool
	check    translate.JSONCheck // of the last event's data
	readErr  error
}

// count notes one event: a billed delta, or the terminal event and its usage.
//
//go:noinline
func (r *relayed) count(ev rawEvent) {
	typ := ev.typ
	if typ == "" {
		typ = gjson.GetBytes(ev.data, "type").Str
	}
	switch {
	case isCountedDelta(typ):
		r.deltas++
	case typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed":
		r.terminal = true
		r.usage, r.reported = terminalUsage(ev.data)
	case typ == "error":
		r.terminal = true
	}
}

// end finishes a relay that stopped reading (the terminal event, a failure, the client
// gone): it ends the upstream call, tells the client why when it is still there, and returns
// what to charge.
//
//go:noinline
func (r *relayed) end(c *gin.Context, resp *http.Response, events *eventReader, sw *streamWriter, idle *idleTimer, cancel context.CancelFunc) accounting.Charge {
	ri := info(c)
	read := ratelimit.Usage{InputTokens: r.reserve.InputTokens, OutputTokens: r.deltas}
	if r.terminal {
		if sw.err == nil {
			// Read the upstream to its end (bounded, and by the idle timer) so its
			// connection can be reused, then let it go.
			_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		} else {
			ri.clientGone = true
		}
		cancel()
		if r.reported {
			return accounting.Known(r.usage)
		}
		// A terminal event without usage, or an error event: every event was read, but
		// what the platform billed for them it did not say.
		return accounting.UpperBound(r.reserve, read, accounting.StreamCut)
	}
	if sw.err != nil || c.Request.Context().Err() != nil {
		ri.clientGone = true
		if r.readErr == nil && !r.invalid {
			// The platform is still sending: count what is in flight before cancelling.
			u, reported := drainAfterCut(events, cancel, read)
			if reported {
				return accounting.Known(u)
			}
			read = u
		}
		cancel()
		return accounting.EarlyCut(r.reserve, read, accounting.EarlyEnd)
	}
	cancel() // failed: nothing more is wanted from the upstream
	switch {
	case idle.fired.Load():
		ri.upstreamErr = "stream_idle"
		_ = sw.write(responsesErrorEvent("stream_idle_timeout", "The platform stopped sending events; the stream was closed."))
	case r.invalid && r.check == translate.JSONTooDeep:
		ri.upstreamErr = "stream_invalid"
		_ = sw.write(responsesErrorEvent(translate.CodeEventTooDeep, "The platform sent an event nested too deeply; the stream was closed."))
	case r.invalid:
		ri.upstreamErr = "stream_invalid"
		_ = sw.write(responsesErrorEvent("upstream_stream_invalid", "The platform sent a malformed event; the stream was closed."))
	default:
		ri.upstreamErr = streamEndKind(r.readErr)
		_ = sw.write(responsesErrorEvent("upstream_stream_ended", "The platform's stream ended before the response was complete."))
	}
	return accounting.UpperBound(r.reserve, read, accounting.StreamCut)
}

// terminalUsage is the usage a terminal Responses event reports, and whether it reports
// one. Not inlined: its lookups would otherwise widen the frame of the loop that holds the
// stream open.
//
//go:noinline
func terminalUsage(data []byte) (ratelimit.Usage, bool) {
	u := gjson.GetManyBytes(data, "response.usage.input_tokens", "response.usage.output_tokens", "response.usage",
		"response.usage.input_tokens_details.cached_tokens", "response.usage.output_tokens_details.reasoning_tokens")
	if !u[2].IsObject() {
		return ratelimit.Usage{}, false
	}
	return ratelimit.Usage{InputTokens: u[0].Int(), OutputTokens: u[1].Int(), CachedInputTokens: u[3].Int(), ReasoningTokens: u[4].Int()}, true
}

func streamEndKind(err error) string {
	if err == nil {
		return "stream_truncated"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	if errors.Is(err, errEventTooLarge) || strings.Contains(err.Error(), "too long") || strings.Contains(err.Error(), "token") {
		return "stream_event_too_large"
	}
	return platform.ErrorKind(err)
}

// responsesErrorEvent is the error event that ends a failed Responses stream. It carries the
// specification's flat fields and the nested error object the live API sends, so clients
// of either reading raise an error instead of taking a truncated answer as complete.
func responsesErrorEvent(code, msg string) []byte {
	nested := openAIErrorJSON(typeServer, code, "", msg)
	frame := make([]byte, 0, 2*len(nested)+64)
	frame = append(frame, "event: error\ndata: {\"type\":\"error\",\"code\":\""...)
	frame = append(frame, code...)
	frame = append(frame, "\",\"message\":\""...)
	frame = append(frame, msg...) // constant messages: nothing to escape
	frame = append(frame, "\",\"param\":null,"...)
	frame = append(frame, nested[1:]...) // `"error":{...}}` from {"error":{...}}
	frame = append(frame, "\n\n"...)
	return frame
}

// errEventTooLarge ends a stream whose event grew past maxEventSize without ending.
var errEventTooLarge = errors.New("upstream event too large")

// rawEvent is one upstream SSE event: its bytes exactly as received, up to and including the
// blank line that ended it, and the fields modelgate reads.
type rawEvent struct {
	raw  []byte // valid until the next call to next
	typ  string // "event:" field
	data []byte // "data:" lines joined by \n; nil when there were none
	// malformed: a line that is neither a comment nor an SSE field (event, data, id,
	// retry). Per the SSE rules a reader would skip it, but it means the upstream is not
	// speaking SSE any more, so it must not be passed on.
	malformed bool
}

// eventReader splits an upstream SSE stream into whole events without altering a byte, so a
// passthrough can forward an event only once it is complete and checked. Lines may end in
// \n, \r\n or \r, as the SSE specification allows.
type eventReader struct {
	r       io.Reader
	max     int
	buf     []byte // unconsumed bytes; buf[:scan] belong to the current event
	scan    int
	eof     error
	data    []byte // joined data lines, when an event has more than one
	started bool
	// beforeWait, when set, runs before each read from the upstream: the relay flushes what
	// it queued there, so nothing waits in a buffer while modelgate waits for the platform.
	beforeWait func()
	pooled     *[]byte // the pooled buffer buf lies in, while it holds one
	// small is where a read starts between events once the upstream has run dry (its last
	// read came back short). A stream spends most of its life waiting there for the
	// platform's next event, and with a thousand streams open the pooled buffers they would
	// otherwise each hold add up; most events fit in small whole. While the upstream keeps
	// a read's worth at hand, reads stay large: fewer of them, and fewer flushes.
	small [smallEventBuf]byte
	dry   bool // the last read returned less than it had room for: the upstream had no more
}

// eventBufs recycles the buffers an event moves to when it outgrows small. Buffers that
// grew further for a large event are left to the collector.
var eventBufs = sync.Pool{New: func() any { b := make([]byte, 0, eventBufSize); return &b }}

const (
	// smallEventBuf holds a typical text delta (about 200 bytes) whole; larger events move
	// on to a pooled buffer. It is what every open stream holds while it waits, so it is
	// kept to that rather than to the platform transport's 1 KiB read buffer.
	smallEventBuf = 256
	eventBufSize  = 4 << 10
	minRead       = 512 // less room than this left in buf, and it grows before a read
)

func newEventReader(r io.Reader, maxEvent int) *eventReader {
	// Not dry at first: the first events usually follow the headers at once.
	er := &eventReader{r: r, max: maxEvent}
	er.buf = er.small[:0]
	return er
}

// release returns a pooled buffer; no event read before may be used afterwards.
func (er *eventReader) release() {
	er.putPooled()
	er.buf = nil
}

func (er *eventReader) putPooled() {
	if er.pooled != nil {
		*er.pooled = (*er.pooled)[:0]
		eventBufs.Put(er.pooled)
		er.pooled = nil
	}
}

// next returns the next complete event. At the end of the stream it returns the read error,
// or io.EOF after a clean end on an event boundary, or io.ErrUnexpectedEOF when the stream
// stopped inside an event.
func (er *eventReader) next() (rawEvent, error) {
	// Drop the event returned last time.
	if er.scan > 0 {
		n := copy(er.buf, er.buf[er.scan:])
		er.buf, er.scan = er.buf[:n], 0
	}
	ev := rawEvent{}
	// A single data line is returned in place, as offsets into buf (which fill may move);
	// only several lines are joined into er.data.
	dataFrom, dataTo, dataLines := 0, 0, 0
	for {
		end, next, ok := lineEnd(er.buf, er.scan, er.eof != nil)
		if !ok {
			if er.eof != nil {
				if len(er.buf) > 0 && errors.Is(er.eof, io.EOF) {
					return rawEvent{}, io.ErrUnexpectedEOF
				}
				return rawEvent{}, er.eof
			}
			if len(er.buf) > er.max {
				return rawEvent{}, errEventTooLarge
			}
			if er.beforeWait != nil {
				er.beforeWait()
			}
			er.fill()
			continue
		}
		if next > er.max {
			return rawEvent{}, errEventTooLarge
		}
		line := er.buf[er.scan:end]
		if !er.started {
			// A byte order mark may open the stream; it stays in raw, out of the field.
			er.started = true
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		er.scan = next
		if len(line) == 0 {
			ev.raw = er.buf[:er.scan]
			switch dataLines {
			case 0:
			case 1:
				// Never nil, even when empty: a "data" line with an empty value is still data.
				ev.data = er.buf[dataFrom:dataTo:dataTo]
			default:
				ev.data = er.data
			}
			return ev, nil
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "":
			// a comment
		case "event":
			ev.typ = eventType(value)
		case "data":
			dataLines++
			switch dataLines {
			case 1:
				// value lies in buf: record where, since buf may move before the event ends.
				dataTo = end
				dataFrom = end - len(value)
			case 2:
				er.data = append(append(append(er.data[:0], er.buf[dataFrom:dataTo]...), '\n'), value...)
			default:
				er.data = append(append(er.data, '\n'), value...)
			}
		case "id", "retry":
		default:
			ev.malformed = true
		}
	}
}

// knownEventTypes are the Responses stream's event names, so naming an event costs no
// allocation; an unknown name is copied.
var knownEventTypes = func() map[string]string {
	m := map[string]string{}
	for _, t := range []string{
		"response.created", "response.in_progress", "response.queued", "response.completed",
		"response.incomplete", "response.failed", "error",
		"response.output_item.added", "response.output_item.done",
		"response.content_part.added", "response.content_part.done",
		"response.output_text.delta", "response.output_text.done", "response.output_text.annotation.added",
		"response.refusal.delta", "response.refusal.done",
		"response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
		"response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
		"response.reasoning_text.delta", "response.reasoning_text.done",
		"response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
	} {
		m[t] = t
	}
	return m
}()

func eventType(b []byte) string {
	if t, ok := knownEventTypes[string(b)]; ok {
		return t
	}
	return string(b)
}

// fill reads more bytes into buf: into small between events once the upstream has run dry,
// holding no pooled buffer while it waits; into a pooled buffer while the upstream has more
// at hand or an event outgrows small; into a buffer of its own for an event too large for
// that. Reading on in large pieces matters: the relay flushes before every read.
func (er *eventReader) fill() {
	onSmall := er.pooled == nil && cap(er.buf) == smallEventBuf
	switch {
	case len(er.buf) == 0 && er.dry:
		er.putPooled()
		er.buf = er.small[:0]
	case onSmall && (!er.dry || cap(er.buf)-len(er.buf) < minRead):
		er.pooled = eventBufs.Get().(*[]byte)
		nb := (*er.pooled)[:len(er.buf)]
		copy(nb, er.buf)
		er.buf = nb
	case cap(er.buf)-len(er.buf) < minRead:
		nb := make([]byte, len(er.buf), 2*cap(er.buf)+eventBufSize)
		copy(nb, er.buf)
		er.putPooled() // copied out of it
		er.buf = nb
	}
	room := cap(er.buf) - len(er.buf)
	n, err := er.r.Read(er.buf[len(er.buf):cap(er.buf)])
	er.buf = er.buf[:len(er.buf)+n]
	er.dry = n < room
	if err != nil {
		er.eof = err
	}
}

// lineEnd finds the line starting at from: its end and where the next line starts. A \r at
// the very end of buf is only a line end once it is known that no \n follows (or at EOF).
// Two IndexByte scans rather than a byte loop: data lines run to hundreds of bytes.
func lineEnd(buf []byte, from int, atEOF bool) (end, next int, ok bool) {
	rest := buf[from:]
	nl := bytes.IndexByte(rest, '\n')
	before := rest
	if nl >= 0 {
		before = rest[:nl]
	}
	if cr := bytes.IndexByte(before, '\r'); cr >= 0 {
		i := from + cr
		switch {
		case i+1 < len(buf) && buf[i+1] == '\n':
			return i, i + 2, true
		case i+1 < len(buf), atEOF:
			return i, i + 1, true
		}
		return 0, 0, false
	}
	if nl >= 0 {
		return from + nl, from + nl + 1, true
	}
	return 0, 0, false
}

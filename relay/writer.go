package relay

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// FlushWriter is the client's side of a stream: gin's and net/http's response writers both
// are one.
type FlushWriter interface {
	io.Writer
	http.Flusher
}

// Writer is how bytes reach a streaming client once the stream started. Events are queued
// as they complete and flushed whenever the relay is about to wait for the upstream, so an
// event is never held back while modelgate waits, and events that arrived together leave in
// one write; the stream's headers leave with the first of them (BeforeWait). A converted
// stream's last events leave with the response's end (Pump.Direct). With keep-alive on, a
// keep-alive frame goes out whenever nothing was written for the interval, so idle-cutting
// front proxies and clients keep the stream open while the model thinks.
// The timer's frame and the handler's events then share one lock, so a frame never lands
// inside an event, and nothing is written once Stop returned; without keep-alive the
// handler is the only writer and takes no lock.
//
// A client that takes events whole (a Sink found along the response writer's wrappers, a
// WebSocket turn) gets them through Event instead of as SSE bytes, and no keep-alive: it has
// its own.
type Writer struct {
	mu      sync.Mutex
	w       FlushWriter
	sink    Sink // the client takes events whole; nil for an SSE client
	every   time.Duration
	timer   *time.Timer
	last    time.Time
	stopped bool
	pending bool   // written but not yet flushed
	err     error  // the first failed write: the client is gone
	frame   string // the dialect's keep-alive, whole SSE frame(s)
	// started: the stream's headers went out. Until then what is written waits in net/http's
	// buffer beside them (unsent counts it), and the first flush sends both (startLocked).
	started bool
	unsent  int
	waited  bool // BeforeWait ran once: the relay has read from the platform
}

// KeepAliveComment is the OpenAI dialects' keep-alive: an SSE comment, which every SSE
// parser (the official SDKs included) drops without surfacing an event.
const KeepAliveComment = ": keep-alive\n\n"

// NewWriter is a Writer whose keep-alive is KeepAliveComment (chat, Responses); every <= 0
// sends none.
func NewWriter(w FlushWriter, every time.Duration) *Writer {
	return NewWriterFrame(w, every, KeepAliveComment)
}

// NewWriterFrame is a Writer whose keep-alive is frame: a dialect whose clients expect a
// keep-alive event of their own (Anthropic's "event: ping") passes it here. frame must be
// one or more complete SSE events or comments, ending in a blank line.
func NewWriterFrame(w FlushWriter, every time.Duration, frame string) *Writer {
	sw := &Writer{w: w, every: every, frame: frame}
	if rw, ok := w.(http.ResponseWriter); ok {
		sw.sink = SinkOf(rw)
	}
	if sw.sink != nil {
		sw.every, sw.started = 0, true
	}
	if sw.every > 0 {
		sw.last = time.Now()
		sw.timer = time.AfterFunc(every, sw.keepAlive)
	}
	return sw
}

// Write sends p and flushes. An error means the client is gone; later writes are skipped.
func (sw *Writer) Write(p []byte) error {
	return sw.send(p, true)
}

// Queue sends p without flushing; Flush (or the next Write) pushes it out.
func (sw *Writer) Queue(p []byte) error {
	return sw.send(p, false)
}

// Event sends one whole event of the writer's own (an error event that ends a stream): to a
// sink as it is, to an SSE client as a frame of its own, flushed.
func (sw *Writer) Event(typ string, data []byte) error {
	if sw.sink != nil {
		return sw.toSink(typ, data)
	}
	frame := make([]byte, 0, len("event: \ndata: \n\n")+len(typ)+len(data))
	frame = append(append(append(append(append(frame, "event: "...), typ...), "\ndata: "...), data...), "\n\n"...)
	return sw.Write(frame)
}

// pass passes on one upstream event, unflushed: its bytes as received to an SSE client, the
// event whole to a sink. sent says the client got something: a sink takes no comment (the
// platform's keep-alive), an event without data. The SSE path is one branch more than a
// Queue of the bytes: no copy, no allocation.
func (sw *Writer) pass(ev *Event) (sent bool, err error) {
	if sw.sink == nil {
		return true, sw.send(ev.Raw, false)
	}
	if ev.Data == nil {
		return false, nil
	}
	return true, sw.toSink(sinkEventType(ev), ev.Data)
}

// toSink hands the sink one event. A sink's writer runs no keep-alive timer, so the relay's
// goroutine is its only caller and no lock is taken.
func (sw *Writer) toSink(typ string, data []byte) error {
	if sw.err != nil || sw.stopped {
		return sw.err
	}
	if err := sw.sink.Event(typ, data); err != nil {
		sw.err = err
		return err
	}
	return nil
}

// Err is the first failed write's error: the client is gone. nil while it is there.
func (sw *Writer) Err() error {
	if sw.timer == nil {
		return sw.err
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.err
}

func (sw *Writer) send(p []byte, flush bool) error {
	if sw.timer == nil {
		return sw.sendLocked(p, flush)
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.sendLocked(p, flush)
}

func (sw *Writer) sendLocked(p []byte, flush bool) error {
	if sw.err != nil || sw.stopped {
		return sw.err
	}
	if !sw.started {
		if sw.unsent+len(p) > unsentRoom {
			return sw.startLocked(p, flush) // it would not fit beside the headers
		}
		sw.unsent += len(p)
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

// unsentRoom is what waits beside unsent headers: net/http's response buffer (2 KB before it
// starts chunking), which formats the headers when it overflows. What fits there is copied
// and nothing more; more than that is written by startLocked.
const unsentRoom = 2048

// Flush pushes queued bytes to the client, and the stream's headers if they have not gone.
func (sw *Writer) Flush() {
	if sw.timer == nil {
		sw.flushLocked()
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.flushLocked()
}

// BeforeWait is the flush before each read from the platform (EventReader.BeforeWait). The
// first read is made with the headers unsent: it brings what the platform sent beside its
// own headers, which then leave together, in the one write that ends the response when it
// was all there (a short answer, or a platform that answers whole). Before every later read
// everything unsent goes out, headers included, so a client never waits for an event, nor
// for the headers, while modelgate waits for the platform's next bytes.
func (sw *Writer) BeforeWait() {
	if !sw.waited {
		sw.waited = true
		if !sw.hasPending() {
			return
		}
	}
	sw.Flush()
}

func (sw *Writer) hasPending() bool {
	if sw.timer != nil { // a keep-alive timer shares the writer
		sw.mu.Lock()
		defer sw.mu.Unlock()
	}
	return sw.pending
}

func (sw *Writer) flushLocked() {
	if sw.err != nil {
		return
	}
	if !sw.started {
		_ = sw.startLocked(nil, true)
		return
	}
	if !sw.pending {
		return
	}
	sw.w.Flush()
	sw.pending = false
	if sw.every > 0 {
		sw.last = time.Now()
	}
}

// startLocked writes p after what waits beside the headers, and flushes with flush. Either
// has net/http format the headers: a flush, or p without one (sendLocked passes p only when
// it overflows the room beside them, which makes net/http's buffer pass on its bytes, the
// headers first); what that wrote without a flush stays queued for the next. net/http formats
// the headers in about 4 KB of stack (see StartStream): on the relay's goroutine, deep in its
// loop, that would double the stack of a stream that may stay open for minutes, so a
// goroutine of its own does it while the relay waits, once a stream.
func (sw *Writer) startLocked(p []byte, flush bool) error {
	done := make(chan error, 1)
	go func() {
		var err error
		if len(p) > 0 {
			_, err = sw.w.Write(p)
		}
		if err == nil && flush {
			sw.w.Flush()
		}
		done <- err
	}()
	err := <-done
	sw.started, sw.unsent, sw.pending = true, 0, !flush
	if err != nil {
		sw.err = err
		return err
	}
	if flush && sw.every > 0 {
		sw.last = time.Now()
	}
	return nil
}

func (sw *Writer) keepAlive() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.stopped || sw.err != nil {
		return
	}
	if idle := time.Since(sw.last); idle < sw.every {
		sw.timer.Reset(sw.every - idle)
		return
	}
	if sw.err != nil || sw.stopped {
		return
	}
	if !sw.started {
		if sw.startLocked([]byte(sw.frame), true) == nil {
			sw.timer.Reset(sw.every)
		}
		return
	}
	var err error
	if ws, ok := sw.w.(io.StringWriter); ok {
		_, err = ws.WriteString(sw.frame) // no copy of the frame per keep-alive
	} else {
		_, err = sw.w.Write([]byte(sw.frame))
	}
	if err != nil {
		sw.err = err
		return
	}
	sw.pending = true
	sw.flushLocked()
	sw.timer.Reset(sw.every)
}

// Stop ends keep-alives; it returns once no keep-alive is being written.
func (sw *Writer) Stop() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.stopped = true
	if sw.timer != nil {
		sw.timer.Stop()
	}
}

// StartStream commits the answer as a 200 event stream. Everything that had to be said in
// headers (request id, rate-limit headers) has been set before this point: they are fixed
// here, and go out with the stream's first bytes (see Writer.BeforeWait), as a reverse proxy
// sends them with the first bytes of the body it relays. A stream whose platform answered
// whole then costs one write, not one for the headers and one for the rest.
//
// Going out, the headers pass through net/http's chunkWriter.writeHeader (a 2.8 KB frame) and
// a sort of the header keys: about 4 KB of stack. The handler's goroutine runs on 8 KB; if the
// frames above leave too little of it, the stack doubles to 16 KB and stays so for the
// stream's whole life: 8 KB more per open stream. So the relay never has them formatted on
// its own goroutine: the Writer sends them from a goroutine of its own (startLocked), or they
// leave once the handler returned. proxy's TestOpenStreamStack holds each route to this;
// bench/tools/stackgrowth.py shows a chain that grows the stack of a running binary.
func StartStream(w http.ResponseWriter) { StartStreamAs(w, "") }

// StartStreamAs is StartStream for a stream of another content type ("" for an event
// stream): Gemini's streamed JSON array is one.
func StartStreamAs(w http.ResponseWriter, contentType string) {
	if contentType == "" {
		contentType = "text/event-stream; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // ask nginx-like front proxies not to buffer
	w.WriteHeader(http.StatusOK)
	if c, ok := w.(interface{ WriteHeaderNow() }); ok {
		c.WriteHeaderNow() // gin's writer: commit the status (and what wrappers stamp) now
	}
}

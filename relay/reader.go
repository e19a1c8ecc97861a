package relay

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// MaxEventSize bounds one upstream SSE event. response.completed repeats the whole output, so
// it can be many megabytes; a scanner's 64 KiB default would cut real answers.
const MaxEventSize = 64 << 20

// ErrEventTooLarge ends a stream whose event grew past the reader's bound without ending.
var ErrEventTooLarge = errors.New("upstream event too large")

// Event is one upstream SSE event: its bytes exactly as received, up to and including the
// blank line that ended it, and the fields modelgate reads.
type Event struct {
	Raw  []byte // valid until the next call to Next
	Type string // "event:" field
	Data []byte // "data:" lines joined by \n; nil when there were none
	// malformed: a line that is neither a comment nor an SSE field (event, data, id,
	// retry). Per the SSE rules a reader would skip it, but it means the upstream is not
	// speaking SSE any more, so it must not be passed on.
	Malformed bool
}

// EventReader splits an upstream SSE stream into whole events without altering a byte, so a
// passthrough can forward an event only once it is complete and checked. Lines may end in
// \n, \r\n or \r, as the SSE specification allows.
type EventReader struct {
	r       io.Reader
	max     int
	buf     []byte // unconsumed bytes; buf[:scan] belong to the current event
	scan    int
	eof     error
	data    []byte // joined data lines, when an event has more than one
	started bool
	// BeforeWait, when set, runs before each read from the upstream: the relay flushes what
	// it queued there, so nothing waits in a buffer while modelgate waits for the platform.
	BeforeWait func()
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

// NewEventReader reads events of at most maxEvent bytes from r; Release it when done.
func NewEventReader(r io.Reader, maxEvent int) *EventReader {
	// Not dry at first: the first events usually follow the headers at once.
	er := &EventReader{r: r, max: maxEvent}
	er.buf = er.small[:0]
	return er
}

// Ended reports that the upstream's end (or a read error) has been read: no later read
// waits for the platform.
func (er *EventReader) Ended() bool { return er.eof != nil }

// Release returns a pooled buffer; no event read before may be used afterwards.
func (er *EventReader) Release() {
	er.putPooled()
	er.buf = nil
}

func (er *EventReader) putPooled() {
	if er.pooled != nil {
		*er.pooled = (*er.pooled)[:0]
		eventBufs.Put(er.pooled)
		er.pooled = nil
	}
}

// Next returns the next complete event. At the end of the stream it returns the read error,
// or io.EOF after a clean end on an event boundary, or io.ErrUnexpectedEOF when the stream
// stopped inside an event.
func (er *EventReader) Next() (Event, error) {
	// Drop the event returned last time.
	if er.scan > 0 {
		n := copy(er.buf, er.buf[er.scan:])
		er.buf, er.scan = er.buf[:n], 0
	}
	ev := Event{}
	// A single data line is returned in place, as offsets into buf (which fill may move);
	// only several lines are joined into er.data.
	dataFrom, dataTo, dataLines := 0, 0, 0
	for {
		end, next, ok := lineEnd(er.buf, er.scan, er.eof != nil)
		if !ok {
			if er.eof != nil {
				if len(er.buf) > 0 && errors.Is(er.eof, io.EOF) {
					return Event{}, io.ErrUnexpectedEOF
				}
				return Event{}, er.eof
			}
			if len(er.buf) > er.max {
				return Event{}, ErrEventTooLarge
			}
			if er.BeforeWait != nil {
				er.BeforeWait()
			}
			er.fill()
			continue
		}
		if next > er.max {
			return Event{}, ErrEventTooLarge
		}
		line := er.buf[er.scan:end]
		if !er.started {
			// A byte order mark may open the stream; it stays in raw, out of the field.
			er.started = true
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		er.scan = next
		if len(line) == 0 {
			ev.Raw = er.buf[:er.scan]
			switch dataLines {
			case 0:
			case 1:
				// Never nil, even when empty: a "data" line with an empty value is still data.
				ev.Data = er.buf[dataFrom:dataTo:dataTo]
			default:
				ev.Data = er.data
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
			ev.Type = eventType(value)
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
			ev.Malformed = true
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
func (er *EventReader) fill() {
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

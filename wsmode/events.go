package wsmode

import "bytes"

// eventSplitter turns the SSE bytes the Responses route writes back into its events' data:
// the route's relay writes each platform event as it arrives, and over a WebSocket each
// event's data goes out as one text frame, byte for byte. Comments (the relay's keep-alives)
// and the `[DONE]` sentinel carry no event and are dropped: the socket has its own pings.
//
// The relay writes whole events, but nothing promises it, so an event split across writes is
// kept until its blank line arrives, and the lines already read are not read again. Lines may
// end in LF, CRLF or CR, as SSE allows.
type eventSplitter struct {
	pending []byte // the start of an event whose blank line has not arrived
	scanned int    // how much of pending is whole lines already read
	// The data read so far of the pending event: with one data line, its value's place in
	// pending (a view, no copy); with more, their values joined by LF in joined.
	dataLines          int
	valueFrom, valueTo int
	joined             []byte
	emit               func(data []byte) error
}

// write takes the next bytes of the stream and emits every event they complete. An error
// from emit (the client is gone) stops it and is returned.
func (s *eventSplitter) write(p []byte) error {
	s.pending = append(s.pending, p...)
	start := 0 // where the pending event starts
	for {
		end, next, ok := lineEnd(s.pending, s.scanned)
		if !ok {
			break
		}
		from := s.scanned
		s.scanned = next
		if end > from {
			s.line(from, end)
			continue
		}
		// A blank line ends the event.
		if err := s.dispatch(); err != nil {
			return err
		}
		start = next
	}
	// Keep only the incomplete event, at the front of the buffer.
	if start > 0 {
		n := copy(s.pending, s.pending[start:])
		s.pending = s.pending[:n]
		s.scanned -= start
		s.valueFrom -= start
		s.valueTo -= start
	}
	return nil
}

// line reads one non-blank line, pending[from:end].
func (s *eventSplitter) line(from, end int) {
	v, ok := dataValue(s.pending[from:end])
	if !ok {
		return
	}
	vFrom := end - len(v)
	switch s.dataLines {
	case 0:
		s.valueFrom, s.valueTo = vFrom, end
	case 1:
		s.joined = append(append(append(s.joined[:0], s.pending[s.valueFrom:s.valueTo]...), '\n'), v...)
	default:
		s.joined = append(append(s.joined, '\n'), v...)
	}
	s.dataLines++
}

// dispatch emits the pending event's data, if it has any, and starts the next event.
func (s *eventSplitter) dispatch() error {
	n := s.dataLines
	s.dataLines = 0
	if n == 0 {
		return nil // a comment or an event without data
	}
	data := s.joined
	if n == 1 {
		data = s.pending[s.valueFrom:s.valueTo]
	}
	if bytes.Equal(data, doneSentinel) {
		return nil
	}
	return s.emit(data)
}

var doneSentinel = []byte("[DONE]")

// lineEnd finds the end of the line starting at i: the index of its terminator and of the
// next line. A CR as the last byte may be the first half of a CRLF still to come, so that
// line is not complete yet.
func lineEnd(b []byte, i int) (end, next int, ok bool) {
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '\n':
			return j, j + 1, true
		case '\r':
			if j+1 == len(b) {
				return 0, 0, false
			}
			if b[j+1] == '\n' {
				return j, j + 2, true
			}
			return j, j + 1, true
		}
	}
	return 0, 0, false
}

// dataValue is the value of a `data` field line: what follows "data:", less one leading
// space. Other fields (event, id, retry) and comments are not data.
func dataValue(line []byte) ([]byte, bool) {
	v, ok := bytes.CutPrefix(line, []byte("data"))
	switch {
	case !ok:
		return nil, false
	case len(v) == 0:
		return v, true // "data" alone: an empty value
	case v[0] != ':':
		return nil, false // a field whose name merely starts with "data"
	}
	v = v[1:]
	if len(v) > 0 && v[0] == ' ' {
		v = v[1:]
	}
	return v, true
}

package relay

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// The event splitter the Responses passthrough relies on: exact bytes, every line ending,
// bounded events, and an honest end.
func TestEventReader(t *testing.T) {
	type want struct {
		raw, typ, data string
		noData, bad    bool
	}
	tests := []struct {
		name    string
		in      string
		want    []want
		wantErr error
	}{
		{"lf", "event: a\ndata: {}\n\n", []want{{raw: "event: a\ndata: {}\n\n", typ: "a", data: "{}"}}, io.EOF},
		{"crlf", "event: a\r\ndata: 1\r\n\r\n", []want{{raw: "event: a\r\ndata: 1\r\n\r\n", typ: "a", data: "1"}}, io.EOF},
		{"cr_only", "data: 1\r\rdata: 2\r\r", []want{{raw: "data: 1\r\r", data: "1"}, {raw: "data: 2\r\r", data: "2"}}, io.EOF},
		{"multi_line_data", "data: a\ndata:b\ndata\n\n", []want{{raw: "data: a\ndata:b\ndata\n\n", data: "a\nb\n"}}, io.EOF},
		{"comment_only", ": keep-alive\n\n", []want{{raw: ": keep-alive\n\n", noData: true}}, io.EOF},
		{"id_retry", "id: 7\nretry: 10\ndata: x\n\n", []want{{raw: "id: 7\nretry: 10\ndata: x\n\n", data: "x"}}, io.EOF},
		{"bom", "\ufeffdata: 1\n\n", []want{{raw: "\ufeffdata: 1\n\n", data: "1"}}, io.EOF},
		{"blank_lines_between", "\n\ndata: 1\n\n", []want{{raw: "\n", noData: true}, {raw: "\n", noData: true}, {raw: "data: 1\n\n", data: "1"}}, io.EOF},
		{"garbage_line", "\x00garbage\n\n", []want{{raw: "\x00garbage\n\n", noData: true, bad: true}}, io.EOF},
		{"html", "<html>502</html>\n\n", []want{{raw: "<html>502</html>\n\n", noData: true, bad: true}}, io.EOF},
		{"cut_inside_event", "data: 1\n\ndata: {\"a\"", []want{{raw: "data: 1\n\n", data: "1"}}, io.ErrUnexpectedEOF},
		{"cut_after_field_line", "data: 1\n", nil, io.ErrUnexpectedEOF},
		{"too_large", "data: " + strings.Repeat("x", 300) + "\n\n", nil, ErrEventTooLarge},
		{"empty", "", nil, io.EOF},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 3, 1 << 20} {
			t.Run(tt.name+"/"+strconv.Itoa(chunk), func(t *testing.T) {
				var r io.Reader = strings.NewReader(tt.in)
				if chunk == 1 {
					r = iotest.OneByteReader(r)
				} else if chunk == 3 {
					r = &chunkReader{s: tt.in, n: 3}
				}
				er := NewEventReader(r, 256)
				for i, w := range tt.want {
					ev, err := er.Next()
					if err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
					if string(ev.Raw) != w.raw || ev.Type != w.typ || string(ev.Data) != w.data || (ev.Data == nil) != w.noData || ev.Malformed != w.bad {
						t.Fatalf("event %d = raw %q typ %q data %q (nil %t) bad %t, want %+v", i, ev.Raw, ev.Type, ev.Data, ev.Data == nil, ev.Malformed, w)
					}
				}
				if _, err := er.Next(); !errors.Is(err, tt.wantErr) {
					t.Fatalf("end = %v, want %v", err, tt.wantErr)
				}
			})
		}
	}
}

// Events of every size come out whole, whichever buffer they needed, and a reader waiting
// between events for an upstream that ran dry holds no pooled buffer: a thousand idle
// streams would otherwise keep a thousand of them.
func TestEventReaderBuffers(t *testing.T) {
	sizes := []int{100, smallEventBuf - 20, smallEventBuf + 300, eventBufSize - 100, eventBufSize + 900, 5 * eventBufSize, 40, 3 * smallEventBuf}
	var in strings.Builder
	var want []string
	for i, n := range sizes {
		ev := "data: " + strings.Repeat(string(rune('a'+i)), n) + "\n\n"
		in.WriteString(ev)
		want = append(want, ev)
	}
	for _, chunk := range []int{1, 7, 700, 1 << 20} {
		t.Run(strconv.Itoa(chunk), func(t *testing.T) {
			w := &watchedReader{r: &chunkReader{s: in.String(), n: chunk}}
			er := NewEventReader(w, 1<<20)
			w.er = er
			for i, raw := range want {
				ev, err := er.Next()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if string(ev.Raw) != raw || string(ev.Data) != raw[len("data: "):len(raw)-2] {
					t.Fatalf("event %d (%d bytes) came out as %d bytes", i, len(raw), len(ev.Raw))
				}
			}
			if _, err := er.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("end = %v, want EOF", err)
			}
			if chunk < smallEventBuf && w.waits == 0 {
				t.Fatal("no read started between events after a short one")
			}
			if w.heldPooled > 0 {
				t.Fatalf("%d of %d reads between events after the upstream ran dry held a pooled buffer", w.heldPooled, w.waits)
			}
			er.Release()
			if er.pooled != nil {
				t.Fatal("release kept the pooled buffer")
			}
		})
	}
}

// While the upstream has plenty at hand, the reader takes it in pooled-buffer pieces, not
// small ones: the relay flushes to the client before every read, so small reads of a burst
// would cost a write each.
func TestEventReaderReadsBurstsLarge(t *testing.T) {
	var in strings.Builder
	for i := range 100 {
		in.WriteString("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + strings.Repeat("x", 200+i) + "\"}\n\n")
	}
	w := &watchedReader{r: strings.NewReader(in.String())}
	er := NewEventReader(w, 1<<20)
	w.er = er
	for {
		if _, err := er.Next(); err != nil {
			break
		}
	}
	if limit := in.Len()/(eventBufSize-minRead) + 2; w.reads > limit {
		t.Fatalf("%d bytes read in %d reads; want at most %d", in.Len(), w.reads, limit)
	}
}

// watchedReader counts reads and notes, at each one that starts with nothing buffered after
// a read that came back short, whether the event reader still holds a pooled buffer.
type watchedReader struct {
	r                 io.Reader
	er                *EventReader
	reads             int
	lastShort         bool
	waits, heldPooled int
}

func (w *watchedReader) Read(p []byte) (int, error) {
	w.reads++
	if len(w.er.buf) == 0 && w.lastShort {
		w.waits++
		if w.er.pooled != nil || cap(w.er.buf) != smallEventBuf {
			w.heldPooled++
		}
	}
	n, err := w.r.Read(p)
	w.lastShort = n < len(p)
	return n, err
}

type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[k:]
	return k, nil
}

// lineEnd agrees with the plain byte loop it replaced on every input of up to eight bytes
// drawn from the three that matter, from every start, at EOF and not.
func TestLineEndMatchesByteLoop(t *testing.T) {
	byteLoop := func(buf []byte, from int, atEOF bool) (int, int, bool) {
		for i := from; i < len(buf); i++ {
			switch buf[i] {
			case '\n':
				return i, i + 1, true
			case '\r':
				if i+1 < len(buf) {
					if buf[i+1] == '\n' {
						return i, i + 2, true
					}
					return i, i + 1, true
				}
				if atEOF {
					return i, i + 1, true
				}
				return 0, 0, false
			}
		}
		return 0, 0, false
	}
	alphabet := []byte{'a', '\r', '\n'}
	var buf []byte
	var walk func(n int)
	checked := 0
	walk = func(n int) {
		for from := 0; from <= len(buf); from++ {
			for _, atEOF := range []bool{false, true} {
				e1, n1, ok1 := lineEnd(buf, from, atEOF)
				e2, n2, ok2 := byteLoop(buf, from, atEOF)
				if e1 != e2 || n1 != n2 || ok1 != ok2 {
					t.Fatalf("lineEnd(%q, %d, %t) = %d %d %t, byte loop %d %d %t", buf, from, atEOF, e1, n1, ok1, e2, n2, ok2)
				}
				checked++
			}
		}
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			buf = append(buf, c)
			walk(n - 1)
			buf = buf[:len(buf)-1]
		}
	}
	walk(8)
	if checked < 10000 {
		t.Fatalf("only %d cases checked", checked)
	}
}

// FuzzEventReader: whatever the upstream sends, the splitter returns events whose bytes are
// the input's own, in order, each ending on a blank line; a clean end has consumed it all.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{
		"event: a\ndata: {}\n\n", "data: 1\r\n\r\ndata: 2\r\r", ": c\n\n", "\ufeffdata: x\n\n",
		"data: {\"a\"", "\x00\x01garbage\n<html>\n\ndata: {not json\n\n", "data\ndata:\ndata: \n\n", "\r", "\n\n\n",
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		const limit = 1 << 10
		er := NewEventReader(&chunkReader{s: string(in), n: int(chunk%16) + 1}, limit)
		var got []byte
		for {
			ev, err := er.Next()
			if err != nil {
				switch {
				case errors.Is(err, io.EOF):
					if !bytes.Equal(got, in) {
						t.Fatalf("clean end after %d of %d bytes", len(got), len(in))
					}
				case errors.Is(err, io.ErrUnexpectedEOF):
					if len(got) >= len(in) {
						t.Fatal("unexpected EOF with nothing left over")
					}
				case errors.Is(err, ErrEventTooLarge):
				default:
					t.Fatalf("error %v", err)
				}
				return
			}
			if len(ev.Raw) == 0 || len(ev.Raw) > limit {
				t.Fatalf("event of %d bytes", len(ev.Raw))
			}
			first := len(got) == 0
			got = append(got, ev.Raw...)
			if !bytes.HasPrefix(in, got) {
				t.Fatalf("events are not the input's bytes")
			}
			text := string(ev.Raw)
			if first {
				text = strings.TrimPrefix(text, "\ufeff") // a byte order mark opens no line
			}
			lines := splitLines(text)
			if lines[len(lines)-1] != "" {
				t.Fatalf("event does not end on a blank line: %q", ev.Raw)
			}
			for _, l := range lines[:len(lines)-1] {
				if l == "" {
					t.Fatalf("blank line inside an event: %q", ev.Raw)
				}
			}
			var data []string
			for _, l := range lines {
				name, value, _ := strings.Cut(l, ":")
				if name == "data" {
					data = append(data, strings.TrimPrefix(value, " "))
				}
			}
			if (ev.Data != nil) != (data != nil) || string(ev.Data) != strings.Join(data, "\n") {
				t.Fatalf("data %q, want %q from %q", ev.Data, strings.Join(data, "\n"), ev.Raw)
			}
		}
	})
}

// splitLines splits on \r\n, \n and \r; the text after the last terminator is dropped.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	parts := strings.Split(s, "\n")
	return parts[:len(parts)-1]
}

package proxy

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"modelgate/config"
	"modelgate/platformsim"
)

// Keep-alive comments fill the silences of a stream, sit between events, and change nothing
// else; without the setting there are none.
func TestKeepAliveComments(t *testing.T) {
	// The pause is ten intervals long so that timers running late on a loaded machine still
	// leave several comments; more than ten would mean comments closer than the interval.
	pausing := func() []platformsim.Event {
		evs := steadyEvents(4, 0)
		evs[3].Delay = 1050 * time.Millisecond
		return evs
	}
	for _, rt := range routes {
		if !rt.stream {
			continue
		}
		for _, every := range []time.Duration{0, 100 * time.Millisecond} {
			t.Run(rt.name+"/"+every.String(), func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) { c.Upstream.KeepAliveInterval = every }})
				env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: pausing()})
				code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
				if code != 200 {
					t.Fatalf("status %d: %s", code, raw)
				}
				evs := parseSSE(t, raw)
				comments := 0
				for _, ev := range evs {
					if ev.comment {
						comments++
						if ev.data != ": keep-alive" {
							t.Errorf("unexpected comment %q", ev.data)
						}
					}
				}
				switch {
				case every == 0 && comments != 0:
					t.Errorf("%d keep-alive comments with keep-alive off", comments)
				case every > 0 && (comments < 3 || comments > 10):
					t.Errorf("%d keep-alive comments in a 1050ms pause at 100ms, want about 10 (3 to 10)", comments)
				}
				stripped := bytes.ReplaceAll(raw, keepAliveComment, nil)
				if rt.path == "/v1/responses" {
					env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: pausing()})
					direct := directStream(t, env, respStreamBody)
					if !bytes.Equal(stripped, direct) {
						t.Errorf("stream differs from the platform's apart from keep-alives:\n got %q\nwant %q", stripped, direct)
					}
				} else if !bytes.HasSuffix(stripped, []byte("data: [DONE]\n\n")) {
					t.Errorf("chat stream incomplete: %q", tail(raw))
				}
			})
		}
	}
}

// directStream reads a stream straight from the simulated platform.
func directStream(t testing.TB, env *resEnv, body string) []byte {
	t.Helper()
	req, _ := newPost(env.simSrv.URL+"/v1/responses", body)
	req.Header.Set("Authorization", "Bearer "+env.canary)
	resp, err := env.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

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
		{"too_large", "data: " + strings.Repeat("x", 300) + "\n\n", nil, errEventTooLarge},
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
				er := newEventReader(r, 256)
				for i, w := range tt.want {
					ev, err := er.next()
					if err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
					if string(ev.raw) != w.raw || ev.typ != w.typ || string(ev.data) != w.data || (ev.data == nil) != w.noData || ev.malformed != w.bad {
						t.Fatalf("event %d = raw %q typ %q data %q (nil %t) bad %t, want %+v", i, ev.raw, ev.typ, ev.data, ev.data == nil, ev.malformed, w)
					}
				}
				if _, err := er.next(); !errors.Is(err, tt.wantErr) {
					t.Fatalf("end = %v, want %v", err, tt.wantErr)
				}
			})
		}
	}
}

// Events of every size come out whole, whichever buffer they needed, and a reader waiting
// between events holds no pooled buffer: a thousand idle streams would otherwise keep a
// thousand of them.
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
			er := newEventReader(w, 1<<20)
			w.er = er
			for i, raw := range want {
				ev, err := er.next()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if string(ev.raw) != raw || string(ev.data) != raw[len("data: "):len(raw)-2] {
					t.Fatalf("event %d (%d bytes) came out as %d bytes", i, len(raw), len(ev.raw))
				}
			}
			if _, err := er.next(); !errors.Is(err, io.EOF) {
				t.Fatalf("end = %v, want EOF", err)
			}
			if w.betweenEvents == 0 {
				t.Fatal("no read started between events")
			}
			if w.heldPooled > 0 {
				t.Fatalf("%d of %d reads between events held a pooled buffer", w.heldPooled, w.betweenEvents)
			}
			er.release()
			if er.pooled != nil {
				t.Fatal("release kept the pooled buffer")
			}
		})
	}
}

// watchedReader notes, at each read that starts with nothing buffered, whether the event
// reader is still holding a pooled buffer.
type watchedReader struct {
	r                         io.Reader
	er                        *eventReader
	betweenEvents, heldPooled int
}

func (w *watchedReader) Read(p []byte) (int, error) {
	if len(w.er.buf) == 0 {
		w.betweenEvents++
		if w.er.pooled != nil || cap(w.er.buf) != smallEventBuf {
			w.heldPooled++
		}
	}
	return w.r.Read(p)
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

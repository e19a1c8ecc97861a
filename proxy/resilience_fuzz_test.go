package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/ratelimit"
)

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
		er := newEventReader(&chunkReader{s: string(in), n: int(chunk%16) + 1}, limit)
		var got []byte
		for {
			ev, err := er.next()
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
				case errors.Is(err, errEventTooLarge):
				default:
					t.Fatalf("error %v", err)
				}
				return
			}
			if len(ev.raw) == 0 || len(ev.raw) > limit {
				t.Fatalf("event of %d bytes", len(ev.raw))
			}
			first := len(got) == 0
			got = append(got, ev.raw...)
			if !bytes.HasPrefix(in, got) {
				t.Fatalf("events are not the input's bytes")
			}
			text := string(ev.raw)
			if first {
				text = strings.TrimPrefix(text, "\ufeff") // a byte order mark opens no line
			}
			lines := splitLines(text)
			if lines[len(lines)-1] != "" {
				t.Fatalf("event does not end on a blank line: %q", ev.raw)
			}
			for _, l := range lines[:len(lines)-1] {
				if l == "" {
					t.Fatalf("blank line inside an event: %q", ev.raw)
				}
			}
			var data []string
			for _, l := range lines {
				name, value, _ := strings.Cut(l, ":")
				if name == "data" {
					data = append(data, strings.TrimPrefix(value, " "))
				}
			}
			if (ev.data != nil) != (data != nil) || string(ev.data) != strings.Join(data, "\n") {
				t.Fatalf("data %q, want %q from %q", ev.data, strings.Join(data, "\n"), ev.raw)
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

// FuzzResponsesForward: whatever the upstream streams, the client gets a well-formed event
// stream that ends with exactly one terminal or error event, and every event it gets is one
// the upstream sent, byte for byte.
func FuzzResponsesForward(f *testing.F) {
	for _, evs := range [][]string{
		streamEventsRaw(),
		streamEventsRaw()[:3],
		append(streamEventsRaw()[:3], "data: {not json\n\n"),
		append(streamEventsRaw()[:2], "\x00garbage\n\n"),
		{"event: error\ndata: {\"type\":\"error\",\"message\":\"x\"}\n\n"},
		{": ping\r\n\r\n", "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\r\n\r\n"},
	} {
		f.Add([]byte(strings.Join(evs, "")))
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{}
	st := &state{cfg: &config.Config{}}
	f.Fuzz(func(t *testing.T, in []byte) {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
		resp := &http.Response{Body: io.NopCloser(bytes.NewReader(in))}
		_, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.forwardResponsesStream(c, st, resp, ratelimit.Usage{InputTokens: 1}, cancel)
		out := w.Body.Bytes()
		er := newEventReader(bytes.NewReader(out), maxEventSize)
		ends := 0
		var forwarded []byte
		for {
			ev, err := er.next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("client stream is not well formed: %v: %q", err, out)
				}
				break
			}
			if ev.malformed || (ev.data != nil && !jsonValid(ev.data)) {
				t.Fatalf("client got a malformed event %q", ev.raw)
			}
			if ends > 0 {
				t.Fatalf("event after the end: %q", ev.raw)
			}
			typ := ev.typ
			if typ == "" {
				typ = jsonType(ev.data)
			}
			switch typ {
			case "response.completed", "response.incomplete", "response.failed", "error":
				ends++
			}
			if !bytes.HasPrefix(ev.raw, []byte("event: error\ndata: {\"type\":\"error\",\"code\":\"")) {
				forwarded = append(forwarded, ev.raw...)
			}
		}
		if ends != 1 {
			t.Fatalf("%d terminal events in %q", ends, out)
		}
		if !bytes.HasPrefix(in, forwarded) {
			t.Fatalf("forwarded bytes are not the upstream's")
		}
	})
}

func streamEventsRaw() []string {
	var out []string
	for _, ev := range streamEvents(0) {
		out = append(out, "event: "+ev.Type+"\ndata: "+ev.Data+"\n\n")
	}
	return out
}

func jsonValid(b []byte) bool { return gjson.ValidBytes(b) }

func jsonType(b []byte) string { return gjson.GetBytes(b, "type").Str }

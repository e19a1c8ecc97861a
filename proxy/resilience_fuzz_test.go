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
	"modelgate/relay"
)

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
		er := relay.NewEventReader(bytes.NewReader(out), relay.MaxEventSize)
		ends := 0
		var forwarded []byte
		for {
			ev, err := er.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("client stream is not well formed: %v: %q", err, out)
				}
				break
			}
			if ev.Malformed || (ev.Data != nil && !jsonValid(ev.Data)) {
				t.Fatalf("client got a malformed event %q", ev.Raw)
			}
			if ends > 0 {
				t.Fatalf("event after the end: %q", ev.Raw)
			}
			typ := ev.Type
			if typ == "" {
				typ = jsonType(ev.Data)
			}
			switch typ {
			case "response.completed", "response.incomplete", "response.failed", "error":
				ends++
			}
			if !bytes.HasPrefix(ev.Raw, []byte("event: error\ndata: {\"type\":\"error\",\"code\":\"")) {
				forwarded = append(forwarded, ev.Raw...)
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

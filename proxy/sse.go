package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	sse "github.com/tmaxmax/go-sse"

	"modelgate/ratelimit"
)

// maxEventSize bounds one upstream SSE event. response.completed repeats the whole output, so
// it can be many megabytes; the reader's 64 KiB default would cut real answers.
const maxEventSize = 64 << 20

var sseReadConfig = &sse.ReadConfig{MaxEventSize: maxEventSize}

// idleTimer ends the upstream call when no bytes arrived for too long.
type idleTimer struct {
	t     *time.Timer
	d     time.Duration
	fired atomic.Bool
}

func newIdleTimer(d time.Duration, cancel context.CancelFunc) *idleTimer {
	it := &idleTimer{d: d}
	if d > 0 {
		it.t = time.AfterFunc(d, func() {
			it.fired.Store(true)
			cancel()
		})
	}
	return it
}

func (it *idleTimer) touch() {
	if it.t != nil {
		it.t.Reset(it.d)
	}
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.t.Stop()
	}
}

// teeToClient hands upstream bytes to the SSE parser and, unchanged, to the client. A failed
// client write is remembered apart from upstream read errors: it means the client left.
type teeToClient struct {
	r        io.Reader
	w        io.Writer
	idle     *idleTimer
	writeErr error
}

func (t *teeToClient) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.idle.touch()
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.writeErr = werr
			return n, werr
		}
	}
	return n, err
}

// startStream commits the answer as a 200 event stream. Everything that had to be said in
// headers (request id, rate-limit headers) has been set before this point.
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

// forwardResponsesStream relays a Responses event stream byte for byte, flushing after every
// event, and reads the terminal event's usage on the side. If the upstream ends without a
// terminal event, the client gets an error event rather than a silent truncation.
func (s *Server) forwardResponsesStream(c *gin.Context, st *state, resp *http.Response, inputEstimate int64, cancel context.CancelFunc) ratelimit.Usage {
	ri := info(c)
	startStream(c)
	if s.hooks.StreamOpened != nil {
		s.hooks.StreamOpened(ri.route)
		defer s.hooks.StreamClosed(ri.route)
	}
	idle := newIdleTimer(st.cfg.Upstream.StreamIdleTimeout, cancel)
	defer idle.stop()
	tee := &teeToClient{r: resp.Body, w: c.Writer, idle: idle}

	var (
		deltas   int64
		terminal bool
		usage    ratelimit.Usage
		readErr  error
	)
	for ev, err := range sse.Read(tee, sseReadConfig) {
		if err != nil {
			readErr = err
			break
		}
		if ri.ttfb == 0 {
			ri.ttfb = time.Since(ri.start)
		}
		c.Writer.Flush()
		typ := ev.Type
		if typ == "" {
			typ = gjson.Get(ev.Data, "type").Str
		}
		switch {
		case isCountedDelta(typ):
			deltas++
		case typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed":
			terminal = true
			u := gjson.GetMany(ev.Data, "response.usage.input_tokens", "response.usage.output_tokens", "response.usage")
			if u[2].IsObject() {
				usage = ratelimit.Usage{InputTokens: u[0].Int(), OutputTokens: u[1].Int()}
			} else {
				usage = ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
			}
		case typ == "error":
			terminal = true
			usage = ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
		}
	}
	if terminal {
		return usage
	}
	switch {
	case tee.writeErr != nil || c.Request.Context().Err() != nil:
		ri.clientGone = true
	case idle.fired.Load():
		ri.upstreamErr = "stream_idle"
		writeResponsesErrorEvent(c, "stream_idle_timeout", "The platform stopped sending events; the stream was closed.")
	default:
		ri.upstreamErr = streamEndKind(readErr)
		writeResponsesErrorEvent(c, "upstream_stream_ended", "The platform's stream ended before the response was complete.")
	}
	return ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
}

func streamEndKind(err error) string {
	if err == nil {
		return "stream_truncated"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	if strings.Contains(err.Error(), "too long") || strings.Contains(err.Error(), "token") {
		return "stream_event_too_large"
	}
	return upstreamErrorKind(err)
}

// writeResponsesErrorEvent ends a Responses stream with an error event. It carries the
// specification's flat fields and the nested error object the live API sends, so clients
// of either reading raise an error instead of taking a truncated answer as complete.
func writeResponsesErrorEvent(c *gin.Context, code, msg string) {
	nested := openAIErrorJSON(typeServer, code, "", msg)
	frame := make([]byte, 0, 2*len(nested)+64)
	frame = append(frame, "event: error\ndata: {\"type\":\"error\",\"code\":\""...)
	frame = append(frame, code...)
	frame = append(frame, "\",\"message\":\""...)
	frame = append(frame, msg...) // constant messages: nothing to escape
	frame = append(frame, "\",\"param\":null,"...)
	frame = append(frame, nested[1:]...) // `"error":{...}}` from {"error":{...}}
	frame = append(frame, "\n\n"...)
	_, _ = c.Writer.Write(frame) // the stream is ending either way
	c.Writer.Flush()
}

package reqlog

import (
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// TextHandler is slog's text handler with a fast path for the access-log line, which every
// request writes: slog renders a record's attributes through generic code (a Value per
// field, a handler state, a pool), about 8 µs of CPU for the line's two dozen fields, a few
// per cent of a proxied call's whole cost; appendTextLine writes the same bytes directly.
// Everything else logs through slog as usual. Both write through one lock, one whole line
// per Write.
type TextHandler struct {
	*slog.TextHandler
	out *lockedWriter
}

// NewTextHandler is slog.NewTextHandler(w, opts) with the access log's fast path.
func NewTextHandler(w io.Writer, opts *slog.HandlerOptions) *TextHandler {
	out := &lockedWriter{w: w}
	return &TextHandler{TextHandler: slog.NewTextHandler(out, opts), out: out}
}

// lockedWriter serializes writes to w, slog's and the fast path's.
type lockedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte // the fast path's line, reused under mu
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// writeLine writes the line appendLine renders; errors are dropped, as slog's logger drops
// them.
func (h *TextHandler) writeLine(appendLine func([]byte) []byte) {
	l := h.out
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = appendLine(l.buf[:0])
	_, _ = l.w.Write(l.buf)
	if cap(l.buf) > maxKeptLine {
		l.buf = nil
	}
}

// maxKeptLine keeps an unusually long line's buffer from staying.
const maxKeptLine = 16 << 10

// textable reports whether the fast path renders extra: the kinds the callers pass.
func textable(extra slog.Attr) bool {
	switch extra.Value.Kind() {
	case slog.KindString, slog.KindInt64:
		return true
	}
	return extra.Key == ""
}

// appendTextLine appends the line slog's text handler writes for r logged at level under
// msg at t (TestTextLineIsSlogs holds it to that, byte for byte).
func appendTextLine(b []byte, t time.Time, level slog.Level, msg string, r *RequestSummary, extra slog.Attr) []byte {
	b = append(b, "time="...)
	b = t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, " level="...)
	b = append(b, level.String()...)
	b = appendTextField(b, "msg", msg)
	b = appendTextField(b, "request_id", r.RequestID)
	b = appendTextField(b, "method", r.Method)
	b = appendTextField(b, "route", r.Route)
	b = appendTextField(b, "team", r.Team)
	b = appendTextField(b, "key", r.Key)
	b = appendTextField(b, "model", r.Model)
	b = appendTextField(b, "served_model", r.ServedModel)
	b = appendIntField(b, "status", int64(r.Status))
	b = append(b, " stream="...)
	b = strconv.AppendBool(b, r.Stream)
	b = append(b, " duration="...)
	b = append(b, r.Duration.String()...)
	b = append(b, " ttfb="...)
	b = append(b, r.TTFB.String()...)
	b = appendIntField(b, "input_tokens", r.InputTokens)
	b = appendIntField(b, "output_tokens", r.OutputTokens)
	b = appendIntField(b, "input_reserved", r.InputReserved)
	b = appendIntField(b, "attempts", int64(r.Attempts))
	b = appendTextField(b, "error_code", r.ErrorCode)
	b = appendTextField(b, "refusal", r.Refusal)
	b = appendTextField(b, "upstream_error", r.UpstreamErr)
	b = appendTextField(b, "usage_estimated", r.UsageEstimated)
	for _, f := range [...]struct{ key, value string }{
		{"trace_id", r.TraceID}, {"upstream_model", r.UpstreamModel}, {"end_user", r.EndUser},
		{"tags", r.Tags}, {"client_request_id", r.ClientRequestID}, {"transport", r.Transport},
		{"outcome", r.Outcome},
	} {
		if f.value != "" {
			b = appendTextField(b, f.key, f.value)
		}
	}
	switch extra.Value.Kind() {
	case slog.KindString:
		if extra.Key != "" {
			b = appendTextField(b, extra.Key, extra.Value.String())
		}
	case slog.KindInt64:
		b = appendIntField(b, extra.Key, extra.Value.Int64())
	}
	return append(b, '\n')
}

// appendTextField appends " key=value", the value quoted as slog's text handler quotes it.
// Keys are the line's own, plain words.
func appendTextField(b []byte, key, value string) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	if quotedInText(value) {
		return strconv.AppendQuote(b, value)
	}
	return append(b, value...)
}

func appendIntField(b []byte, key string, v int64) []byte {
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendInt(b, v, 10)
}

// quotedInText is slog's text format's rule for a string value: quoted when empty, or when
// it holds a space, '=', '"', an ASCII control character, or a rune that is not valid UTF-8,
// a space or not printable.
func quotedInText(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == '=' || c == '"' {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += n
	}
	return false
}

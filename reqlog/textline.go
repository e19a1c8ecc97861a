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
// msg at t (TestTextLineIsSlogs holds it to that, byte for byte). The fields are attrs', so
// both paths write the one list; only the formatting is done here.
func appendTextLine(b []byte, t time.Time, level slog.Level, msg string, r *RequestSummary, extra slog.Attr) []byte {
	b = append(b, "time="...)
	b = t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, " level="...)
	b = append(b, level.String()...)
	b = appendTextField(b, "msg", msg)
	var buf [lineFields]slog.Attr
	for _, a := range r.attrs(buf[:0], extra) {
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			b = appendTextField(b, a.Key, v.String())
		case slog.KindInt64:
			b = appendIntField(b, a.Key, v.Int64())
		case slog.KindBool:
			b = append(b, ' ')
			b = append(b, a.Key...)
			b = append(b, '=')
			b = strconv.AppendBool(b, v.Bool())
		default: // KindDuration: attrs and textable let no other kind through
			b = append(b, ' ')
			b = append(b, a.Key...)
			b = append(b, '=')
			b = append(b, v.Duration().String()...)
		}
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

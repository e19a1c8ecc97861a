package reqlog

import (
	"context"
	"log/slog"
	"time"
)

// Log writes r as its access-log line under msg: "request" for a request a route answered,
// "background response" for a background job's end, with the same fields either way, so
// one query reads both. extra, when its Key is set, is one more field of the caller's (a
// WebSocket connection's turns, a job's stored status). A status of 500 or more, or a
// crashed outcome, logs at warn.
//
// On a TextHandler (the text log format) the line is written by appendTextLine, the same
// bytes slog's text handler writes for it in a fraction of the time; any other handler gets
// it through slog.
func (r *RequestSummary) Log(log *slog.Logger, msg string, extra slog.Attr) {
	level := slog.LevelInfo
	if r.Status >= 500 || r.Outcome != "" {
		level = slog.LevelWarn
	}
	if h, ok := log.Handler().(*TextHandler); ok && textable(extra) {
		if h.Enabled(context.Background(), level) {
			h.writeLine(func(b []byte) []byte { return appendTextLine(b, time.Now(), level, msg, r, extra) })
		}
		return
	}
	var buf [lineFields]slog.Attr
	log.LogAttrs(context.Background(), level, msg, r.attrs(buf[:0], extra)...)
}

// lineFields is the most fields a line has.
const lineFields = 28

// attrs appends the line's fields to line, in their order. Only these fields are ever
// logged: never headers, keys, prompts or bodies. The last five of the fixed ones, and
// transport and outcome, are there only when set: without tracing, routes, attribution or
// a caller's own request id, the line is as it always was.
func (r *RequestSummary) attrs(line []slog.Attr, extra slog.Attr) []slog.Attr {
	line = append(line,
		slog.String("request_id", r.RequestID),
		slog.String("method", r.Method),
		slog.String("route", r.Route),
		slog.String("team", r.Team),
		slog.String("key", r.Key),
		slog.String("model", r.Model),
		slog.String("served_model", r.ServedModel),
		slog.Int("status", r.Status),
		slog.Bool("stream", r.Stream),
		slog.Duration("duration", r.Duration),
		slog.Duration("ttfb", r.TTFB),
		slog.Int64("input_tokens", r.InputTokens),
		slog.Int64("output_tokens", r.OutputTokens),
		slog.Int64("input_reserved", r.InputReserved),
		slog.Int("attempts", r.Attempts),
		slog.String("error_code", r.ErrorCode),
		slog.String("refusal", r.Refusal),
		slog.String("upstream_error", r.UpstreamErr),
		slog.String("usage_estimated", r.UsageEstimated))
	for _, f := range [...]struct{ key, value string }{
		{"trace_id", r.TraceID}, {"upstream_model", r.UpstreamModel}, {"end_user", r.EndUser},
		{"tags", r.Tags}, {"client_request_id", r.ClientRequestID}, {"transport", r.Transport},
		{"outcome", r.Outcome},
	} {
		if f.value != "" {
			line = append(line, slog.String(f.key, f.value))
		}
	}
	if extra.Key != "" {
		line = append(line, extra)
	}
	return line
}

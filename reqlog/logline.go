package reqlog

import (
	"context"
	"log/slog"
)

// Log writes r as its access-log line under msg: "request" for a request a route answered,
// "background response" for a background job's end, with the same fields either way, so
// one query reads both. extra, when its Key is set, is one more field of the caller's (a
// WebSocket connection's turns, a job's stored status). A status of 500 or more, or a
// crashed outcome, logs at warn.
func (r *RequestSummary) Log(log *slog.Logger, msg string, extra slog.Attr) {
	level := slog.LevelInfo
	if r.Status >= 500 {
		level = slog.LevelWarn
	}
	// Only these fields are ever logged: never headers, keys, prompts or bodies.
	attrs := [...]slog.Attr{
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
		slog.String("usage_estimated", r.UsageEstimated),
		slog.String("trace_id", r.TraceID),
		slog.String("upstream_model", r.UpstreamModel),
		slog.String("end_user", r.EndUser),
		slog.String("tags", r.Tags),
		slog.String("client_request_id", r.ClientRequestID),
	}
	// The last five are there only when set: without tracing, routes, attribution or a
	// caller's own request id, the line is as it always was. Appending writes within the
	// array (never past what it still reads), so nothing is allocated.
	const optional = 5
	line := attrs[:len(attrs)-optional]
	for i, set := range [optional]bool{r.TraceID != "", r.UpstreamModel != "", r.EndUser != "", r.Tags != "", r.ClientRequestID != ""} {
		if set {
			line = append(line, attrs[len(attrs)-optional+i])
		}
	}
	if r.Transport != "" {
		line = append(line, slog.String("transport", r.Transport))
	}
	if r.Outcome != "" {
		line = append(line, slog.String("outcome", r.Outcome))
		level = slog.LevelWarn
	}
	if extra.Key != "" {
		line = append(line, extra)
	}
	log.LogAttrs(context.Background(), level, msg, line...)
}

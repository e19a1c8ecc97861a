package proxy

import (
	"log/slog"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/ratelimit"
)

// settle settles the request's ticket with ch and records it for the access log, the metrics
// and, when the usage is estimated, the "billed, usage unknown" warning an operator
// reconciles against the platform's bill.
func (s *Server) settle(c *gin.Context, t *ratelimit.Ticket, ch accounting.Charge) {
	s.settleInfo(info(c), t, ch)
}

// settleInfo is settle for a request known by its requestInfo alone (a background job).
func (s *Server) settleInfo(ri *requestInfo, t *ratelimit.Ticket, ch accounting.Charge) {
	t.Settle(ch.Usage)
	ri.InputTokens, ri.OutputTokens = ch.Usage.InputTokens, ch.Usage.OutputTokens
	ri.CachedTokens, ri.ReasoningTokens = ch.Usage.CachedInputTokens, ch.Usage.ReasoningTokens
	ri.UsageEstimated = ch.Unknown
	if ch.Unknown != "" {
		s.log.Warn("billed, usage unknown",
			slog.String("request_id", ri.RequestID),
			slog.String("route", ri.Route),
			slog.String("team", ri.Team),
			slog.String("reason", ch.Unknown),
			slog.Int64("input_tokens", ch.Usage.InputTokens),
			slog.Int64("output_tokens", ch.Usage.OutputTokens),
		)
	}
}

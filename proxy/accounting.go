package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

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
	ri.inputTokens, ri.outputTokens = ch.Usage.InputTokens, ch.Usage.OutputTokens
	ri.cachedTokens, ri.reasoningTokens = ch.Usage.CachedInputTokens, ch.Usage.ReasoningTokens
	ri.usageEstimated = ch.Unknown
	if ch.Unknown != "" {
		s.log.Warn("billed, usage unknown",
			slog.String("request_id", ri.requestID),
			slog.String("route", ri.route),
			slog.String("team", ri.team),
			slog.String("reason", ch.Unknown),
			slog.Int64("input_tokens", ch.Usage.InputTokens),
			slog.Int64("output_tokens", ch.Usage.OutputTokens),
		)
	}
}

// After modelgate ends a stream at a stop sequence, it reads on for a moment, forwarding
// nothing, before it cancels the call: what the platform already sent is in flight, billed,
// and can still be counted. The read stops at the terminal event (whose usage is then the platform's own
// figure), after cutDrainBytes, or after cutDrainTime, whichever comes first; the platform
// stops generating when the cancellation reaches it.
const (
	cutDrainBytes = 1 << 20
	cutDrainTime  = 500 * time.Millisecond
)

// drainAfterCut reads events after a cut and returns read plus the output they carried, and
// whether a terminal event reported the platform's usage (then that usage is returned).
// cancel ends the call; it is called when the time runs out and before returning.
func drainAfterCut(events *eventReader, cancel context.CancelFunc, read ratelimit.Usage) (ratelimit.Usage, bool) {
	defer cancel()
	stop := time.AfterFunc(cutDrainTime, cancel)
	defer stop.Stop()
	events.beforeWait = nil // nothing goes to the client any more
	n := 0
	for n < cutDrainBytes {
		ev, err := events.next()
		if err != nil || ev.malformed {
			break
		}
		n += len(ev.raw)
		typ := ev.typ
		if typ == "" && ev.data != nil {
			typ = gjson.GetBytes(ev.data, "type").Str
		}
		switch {
		case isCountedDelta(typ):
			read.OutputTokens++
		case typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed":
			if u, ok := terminalUsage(ev.data); ok {
				return u, true
			}
			return read, false
		case typ == "error":
			return read, false
		}
	}
	return read, false
}

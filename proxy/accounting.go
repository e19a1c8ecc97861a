package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/ratelimit"
)

// charge is what one admitted request settles. Every admitted request settles exactly once
// (the handler defers it), and never at zero when the platform may have billed:
//   - the platform reported its usage: exactly that, and unknown is empty;
//   - the platform may have billed but its figure cannot be known (the request was sent and
//     no answer came, the answer could not be read, the platform cut its stream): an upper
//     bound, the reservation unless more was read;
//   - modelgate ended a stream itself: what was read plus inFlightAllowance for what the
//     platform generated before the cancellation reached it. At a stop sequence modelgate
//     first reads on briefly (see drainAfterCut) and charges the platform's own figure when
//     the terminal event comes; a client that leaves cancels the call at once.
//
// docs/accounting.md explains each case to operators.
type charge struct {
	usage   ratelimit.Usage
	unknown string // "" when usage is the platform's own figure; otherwise why it is estimated
}

// Why usage had to be estimated: the reason label of modelgate_usage_estimated_total and the
// reason field of the "billed, usage unknown" log line.
const (
	estNoAnswer  = "no_answer"       // sent, but no answer headers came (timeout, reset, client gone)
	estBody      = "unreadable_body" // a 2xx answer whose body failed to read, parse or report usage
	estStreamCut = "stream_cut"      // the platform's stream ended without reporting usage
	estEarlyCut  = "early_cut"       // modelgate ended the stream itself
	estFanoutCut = "fanout_cut"      // a choice abandoned because another choice of the request failed
)

// inFlightAllowance is the output charged on top of what was read when modelgate cuts a
// stream itself: the events the platform may have generated between modelgate's last read
// and the moment its cancellation reached the platform. Never more than what is left of the
// output reservation.
const inFlightAllowance = 16

func knownUsage(u ratelimit.Usage) charge { return charge{usage: u} }

// upperBound is the charge for usage that cannot be known: the reservation, or what was read
// where that is more.
func upperBound(reserve, read ratelimit.Usage, why string) charge {
	return charge{usage: ratelimit.Usage{
		InputTokens:  max(reserve.InputTokens, read.InputTokens),
		OutputTokens: max(reserve.OutputTokens, read.OutputTokens),
	}, unknown: why}
}

// earlyCut is the charge for a stream modelgate ended itself after reading read.
func earlyCut(reserve, read ratelimit.Usage, why string) charge {
	extra := min(int64(inFlightAllowance), max(reserve.OutputTokens-read.OutputTokens, 0))
	return charge{usage: ratelimit.Usage{
		InputTokens:  max(reserve.InputTokens, read.InputTokens),
		OutputTokens: read.OutputTokens + extra,
	}, unknown: why}
}

// plus adds the charges of the choices of one request; the first estimate's reason names it.
func (ch charge) plus(o charge) charge {
	ch.usage.InputTokens += o.usage.InputTokens
	ch.usage.OutputTokens += o.usage.OutputTokens
	ch.usage.CachedInputTokens += o.usage.CachedInputTokens
	ch.usage.ReasoningTokens += o.usage.ReasoningTokens
	if ch.unknown == "" {
		ch.unknown = o.unknown
	}
	return ch
}

// settle settles the request's ticket with ch and records it for the access log, the metrics
// and, when the usage is estimated, the "billed, usage unknown" warning an operator
// reconciles against the platform's bill.
func (s *Server) settle(c *gin.Context, t *ratelimit.Ticket, ch charge) {
	s.settleInfo(info(c), t, ch)
}

// settleInfo is settle for a request known by its requestInfo alone (a background job).
func (s *Server) settleInfo(ri *requestInfo, t *ratelimit.Ticket, ch charge) {
	t.Settle(ch.usage)
	ri.inputTokens, ri.outputTokens = ch.usage.InputTokens, ch.usage.OutputTokens
	ri.cachedTokens, ri.reasoningTokens = ch.usage.CachedInputTokens, ch.usage.ReasoningTokens
	ri.usageEstimated = ch.unknown
	if ch.unknown != "" {
		s.log.Warn("billed, usage unknown",
			slog.String("request_id", ri.requestID),
			slog.String("route", ri.route),
			slog.String("team", ri.team),
			slog.String("reason", ch.unknown),
			slog.Int64("input_tokens", ch.usage.InputTokens),
			slog.Int64("output_tokens", ch.usage.OutputTokens),
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

package proxy

import (
	"log/slog"

	"github.com/gin-gonic/gin"

	"modelgate/ratelimit"
)

// charge is what one admitted request settles. Every admitted request settles exactly once
// (the handler defers it), and never at zero when the platform may have billed:
//   - the platform reported its usage: exactly that, and unknown is empty;
//   - the platform may have billed but its figure cannot be known (the request was sent and
//     no answer came, the answer could not be read, the platform cut its stream): an upper
//     bound, the reservation unless more was read;
//   - modelgate ended a stream itself (client gone, stop sequence, a sibling choice failed):
//     what was read plus inFlightAllowance for what the platform sent before it saw the cut.
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
	if ch.unknown == "" {
		ch.unknown = o.unknown
	}
	return ch
}

// settle settles the request's ticket with ch and records it for the access log, the metrics
// and, when the usage is estimated, the "billed, usage unknown" warning an operator
// reconciles against the platform's bill.
func (s *Server) settle(c *gin.Context, t *ratelimit.Ticket, ch charge) {
	t.Settle(ch.usage)
	ri := info(c)
	ri.inputTokens, ri.outputTokens = ch.usage.InputTokens, ch.usage.OutputTokens
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

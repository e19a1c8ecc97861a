// Package accounting says what one admitted request is charged and settles it exactly once,
// never at zero when the platform may have billed: the platform's own figure when it reported
// one (Known), else a bound (UpperBound, EarlyCut), as the one rule, ChargeFor, picks from how
// the call ended. docs/accounting.md explains each case to operators.
package accounting

import "modelgate/ratelimit"

// Charge is what one admitted request settles.
type Charge struct {
	Usage ratelimit.Usage
	// Unknown is "" when Usage is the platform's own figure; otherwise why it is estimated.
	Unknown string
	// Reported is how many platform calls reported the usage it holds: 1 for Known, the sum
	// for choices added up. Calibration compares their input with as many estimates (a
	// fan-out choice the platform refused reported nothing and billed nothing).
	Reported int
}

// Why usage had to be estimated: the reason label of modelgate_usage_estimated_total and the
// reason field of the "billed, usage unknown" log line.
const (
	NoAnswer  = "no_answer"       // sent, but no answer headers came (timeout, reset, client gone)
	BadBody   = "unreadable_body" // a 2xx answer whose body failed to read, parse or report usage
	StreamCut = "stream_cut"      // the platform's stream ended without reporting usage
	EarlyEnd  = "early_cut"       // modelgate ended the stream itself
	FanoutCut = "fanout_cut"      // a choice abandoned because another choice of the request failed
	Crashed   = "crashed"         // open when the replica was killed: its next start charged its reservation
)

// InFlightAllowance is the output charged on top of what was read when modelgate cuts a
// stream itself: the events the platform may have generated between modelgate's last read
// and the moment its cancellation reached the platform. Never more than what is left of the
// output reservation.
const InFlightAllowance = 16

// Known is the charge for usage the platform reported.
func Known(u ratelimit.Usage) Charge { return Charge{Usage: u, Reported: 1} }

// UpperBound is the charge for usage that cannot be known: the reservation, or what was read
// where that is more.
func UpperBound(reserve, read ratelimit.Usage, why string) Charge {
	return Charge{Usage: ratelimit.Usage{
		InputTokens:  max(reserve.InputTokens, read.InputTokens),
		OutputTokens: max(reserve.OutputTokens, read.OutputTokens),
	}, Unknown: why}
}

// EarlyCut is the charge for a stream modelgate ended itself after reading read.
func EarlyCut(reserve, read ratelimit.Usage, why string) Charge {
	extra := min(int64(InFlightAllowance), max(reserve.OutputTokens-read.OutputTokens, 0))
	return Charge{Usage: ratelimit.Usage{
		InputTokens:  max(reserve.InputTokens, read.InputTokens),
		OutputTokens: read.OutputTokens + extra,
	}, Unknown: why}
}

// Plus adds the charges of the choices of one request; the first estimate's reason names it.
func (ch Charge) Plus(o Charge) Charge {
	ch.Usage.InputTokens += o.Usage.InputTokens
	ch.Usage.OutputTokens += o.Usage.OutputTokens
	ch.Usage.CachedInputTokens += o.Usage.CachedInputTokens
	ch.Usage.ReasoningTokens += o.Usage.ReasoningTokens
	ch.Reported += o.Reported
	if ch.Unknown == "" {
		ch.Unknown = o.Unknown
	}
	return ch
}

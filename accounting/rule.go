package accounting

import "modelgate/ratelimit"

// End is how an admitted platform call ended when the platform did not report its usage: a
// row of the settlement table in docs/accounting.md. The relays, the gateway and the jobs
// only say which; ChargeFor alone says what each costs.
type End uint8

const (
	// PlatformCut: a stream the platform ended without its usage (reset, truncated,
	// garbage, silent past the idle timeout, an error event or a terminal event without
	// usage on /v1/responses): the reservation, or what was read where that is more.
	PlatformCut End = iota
	// OwnCut: a stream modelgate ended itself (the client left, a stop sequence, a chat
	// stream complete but for its figure, a job cancelled): what was read plus the
	// in-flight allowance.
	OwnCut
	// Unanswered: the request was sent whole and no answer headers came (a timeout, a
	// reset, the client gone while the platform worked, a stall past first_token_timeout):
	// the reservation.
	Unanswered
	// Unreadable: a 2xx answer that could not be read, parsed, or said no usage, or one in
	// the other form than asked: the reservation.
	Unreadable
	// FanoutAbandoned: an answered choice of an n>1 chat given up because a sibling failed,
	// whose terminal event did not come within the drain: the reservation.
	FanoutAbandoned
	// NotBilled: the platform refused the call (an error status) or it never reached the
	// platform whole: nothing.
	NotBilled
)

// Ending is what a relay knows of one platform call once it stopped reading it.
type Ending struct {
	How End
	// Reported says the platform reported its usage (a stream's terminal event, a JSON
	// answer's usage object): Read is then that figure, and How does not matter, since a
	// report is charged as it is however the call ended.
	Reported bool
	// Read is the platform's usage when Reported; otherwise what was read before the end:
	// the input reservation and one output token per delta event.
	Read ratelimit.Usage
}

// ChargeFor is the one charge rule: what a call that ended as e costs, given its reservation
// (one platform call's input estimate and output cap). Every relay, the gateway's failures
// and the background jobs charge through it (TestOneChargeRule).
func ChargeFor(reserve ratelimit.Usage, e Ending) Charge {
	if e.Reported {
		return Known(e.Read)
	}
	switch e.How {
	case OwnCut:
		return EarlyCut(reserve, e.Read, EarlyEnd)
	case Unanswered:
		return UpperBound(reserve, e.Read, NoAnswer)
	case Unreadable:
		return UpperBound(reserve, e.Read, BadBody)
	case FanoutAbandoned:
		return UpperBound(reserve, e.Read, FanoutCut)
	case NotBilled:
		return Charge{}
	}
	return UpperBound(reserve, e.Read, StreamCut)
}

// ForAnswer is the charge of a JSON (non-stream) answer: the platform billed it whole before
// sending it, so its usage when it reported one (reported, usage), else the reservation as
// for an unreadable body. An answer that could not be read at all is ForAnswer(reserve,
// ratelimit.Usage{}, false).
func ForAnswer(reserve, usage ratelimit.Usage, reported bool) Charge {
	return ChargeFor(reserve, Ending{How: Unreadable, Reported: reported, Read: usage})
}

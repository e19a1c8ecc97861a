package accounting

import "modelgate/ratelimit"

// End is how an admitted platform call ended when the platform did not report its usage: a
// row of the settlement table in docs/accounting.md. The relays, the gateway and the jobs
// only say which; ChargeFor alone says what each costs.
type End uint8

const (
	PlatformCut     End = iota // a stream the platform cut, broke or ended without usage: stream_cut
	OwnCut                     // a stream modelgate ended (client gone, stop sequence, job cancelled): early_cut
	Unanswered                 // sent whole, no answer headers (a stall too): no_answer
	Unreadable                 // a 2xx answer unreadable, without usage, or in the other form: unreadable_body
	FanoutAbandoned            // an n>1 choice given up as a sibling failed, unreported in the drain: fanout_cut
	NotBilled                  // refused by the platform, or never sent whole: nothing
	Killed                     // open when the replica was killed, charged at its next start: crashed
)

// Ending is what a relay knows of one platform call once it stopped reading it: how it
// ended, and whether the platform reported its usage (Read is then that figure, charged as
// it is however the call ended) or what was read before the end (the input reservation and
// one output token per delta event).
type Ending struct {
	How      End
	Reported bool
	Read     ratelimit.Usage
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
	case Killed:
		return UpperBound(reserve, e.Read, Crashed)
	}
	return UpperBound(reserve, e.Read, StreamCut)
}

// ForAnswer is the charge of a JSON (non-stream) answer, billed whole before it was sent:
// its usage when it reported one, else the reservation as an unreadable body (an answer not
// read at all is ForAnswer(reserve, ratelimit.Usage{}, false)).
func ForAnswer(reserve, usage ratelimit.Usage, reported bool) Charge {
	return ChargeFor(reserve, Ending{How: Unreadable, Reported: reported, Read: usage})
}

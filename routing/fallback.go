// Package routing holds the pure choices of issue 27's model routing: whether a failed call
// may move on to a fallback model, which fallback it moves to, and which of a model's
// weighted routes a call takes. No I/O, no clock: its callers (upstream's fallback chain,
// proxy's choice of a weighted route) hand it what they know.
package routing

// Trigger is what a failed attempt means for its fallback chain.
type Trigger int

const (
	// Stay: the failure goes to the client (the client's own error, modelgate's credential
	// refused, the client gone).
	Stay Trigger = iota
	// Next: the model is overloaded, down or stalled: try the next fallback.
	Next
	// Larger: the input does not fit the model: try the next fallback with a larger
	// context window.
	Larger
)

// Failed describes a failed attempt as the gateway reports it.
type Failed struct {
	Status     int    // the status the client would get; 0 when the client is gone
	Kind       string // upstream.Failure.Kind: status_5xx, timeout, dial, upstream_auth, ...
	Code       string // error.code of the platform's error, when it sent one
	ClientGone bool
}

// ContextLengthCode is the platform's error code for an input larger than the model's
// context window (a 400).
const ContextLengthCode = "context_length_exceeded"

// Classify names what a failed attempt means for its chain. A 429 reaches it only once every
// platform key of the pool refused (the key pool's own failover comes first); a 5xx is the
// platform's, or a connect or first-byte timeout (502/504) named by modelgate; a stall before
// the first output event is a 504 too. modelgate's own credential refused by the platform
// (upstream_auth) would be refused for every model, so it stays.
func Classify(f Failed) Trigger {
	switch {
	case f.ClientGone || f.Status == 0:
		return Stay
	case f.Status == 400 && f.Code == ContextLengthCode:
		return Larger
	case f.Kind == "upstream_auth":
		return Stay
	case f.Status == 429 || f.Status >= 500:
		return Next
	}
	return Stay
}

// Candidate is one fallback as the caller sees it now.
type Candidate struct {
	ContextWindow int64 // tokens; 0 when not configured
	Allowed       bool  // the caller's key and team may use it
	Healthy       bool  // its breaker lets a call through (true without breakers)
}

// Pick returns the index of the first candidate at or after from that the trigger may move
// to, or -1. For Larger, a candidate qualifies only with a context window known to be
// larger than window, the failed model's (a model whose window is unknown is never assumed
// larger). A candidate the caller may not use, or whose breaker is open, is skipped.
func Pick(cands []Candidate, from int, t Trigger, window int64) int {
	if t == Stay {
		return -1
	}
	for i := max(from, 0); i < len(cands); i++ {
		c := cands[i]
		if !c.Allowed || !c.Healthy {
			continue
		}
		if t == Larger && (c.ContextWindow <= 0 || c.ContextWindow <= window) {
			continue
		}
		return i
	}
	return -1
}

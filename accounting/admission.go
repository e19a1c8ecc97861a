package accounting

import (
	"modelgate/auth"
	"modelgate/ratelimit"
)

// The limiter's views of the calls a route asks about before a body is read, and what a
// request's record notes of an admission the limiter let through.

// EarlyRequest is the limiter's view of a model call by p before its body is read: one
// output token, whatever the body will say, so a key or team out of requests, concurrency
// or daily tokens is refused without a body read, an inflating or a parse. Nothing is
// charged and no slot is taken by asking (ratelimit.Limiter.Check).
func EarlyRequest(p *auth.Principal) ratelimit.Request {
	return LimitRequest(p, ratelimit.Usage{OutputTokens: 1})
}

// LookupRequest is the limiter's view of a call by p that reads kept records or estimates
// tokens (the stored-response routes, count_tokens): it uses no model tokens and takes no
// concurrency slot, so a key whose slots are all held by its own background responses can
// still poll and cancel them, and a spent daily budget does not hide a result already paid
// for.
func LookupRequest(p *auth.Principal) ratelimit.Request {
	return WithoutConcurrency(LimitRequest(p, ratelimit.Usage{}))
}

// AdmissionNote is what the request's record notes (reqlog.Record.Refusal) of a decision
// that did not refuse: what shadow mode would have refused ("shadow_<reason>"), or that the
// shared store failed and the config let the call through; "" for a plain admission.
func AdmissionNote(d ratelimit.Decision) string {
	switch {
	case d.StoreError && d.Allowed:
		return "store_unavailable_allowed"
	case d.WouldRefuse != "":
		return "shadow_" + string(d.WouldRefuse)
	}
	return ""
}

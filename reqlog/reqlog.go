// Package reqlog is the record of finished requests that the proxy hands to its observers
// (metrics, tests): the summary of one request, the hooks that receive it, and the state of
// the platform keys. It holds plain values only, so an observer depends on this small
// package and never on the proxy that fills it in.
package reqlog

import "time"

// Hooks let the operations layer observe requests without the handlers knowing about it.
// Nil fields are skipped.
type Hooks struct {
	// RequestStarted and RequestDone bracket every request (in-flight gauges).
	RequestStarted func()
	// RequestDone is called once per request after the answer was written.
	RequestDone func(RequestSummary)
	// StreamOpened and StreamClosed bracket every streamed answer.
	StreamOpened, StreamClosed func(route string)
	// Fallback is called each time a call moves down its model's fallback chain (issue
	// 45): model is the client's model id, served the fallback it moved to, reason one of
	// the Fallback* words. All three are bounded by the config and the code.
	Fallback func(model, served, reason string)
}

// Why a call moved to a fallback (the reason label of modelgate_fallbacks_total).
const (
	FallbackStatus5xx         = "status_5xx"          // the platform answered 5xx
	FallbackStatus429         = "status_429"          // every platform key was rate-limited
	FallbackTimeout           = "timeout"             // no answer in time (504)
	FallbackUnreachable       = "unreachable"         // the platform could not be reached (502)
	FallbackFirstTokenTimeout = "first_token_timeout" // the stream sent no output in time
	FallbackBreakerOpen       = "breaker_open"        // the model's circuit breaker is open
	FallbackContextLength     = "context_length"      // the input did not fit the model
	FallbackOther             = "other"
)

// RequestSummary is the record of one finished request, for logs and metrics.
type RequestSummary struct {
	RequestID string
	// ClientRequestID is the caller's X-Request-Id, bounded and plain; "" when none was sent.
	ClientRequestID string
	Route           string
	Method          string
	Team, Key       string
	RuntimeTeam     bool // Team was created through the admin API
	Model           string
	ServedModel     string // the fallback that served it; "" when Model did
	Status          int
	Stream          bool
	Duration        time.Duration
	TTFB            time.Duration
	InputTokens     int64
	OutputTokens    int64
	// InputReserved is the input part of the request's reservation (0 when none was made).
	InputReserved int64
	Attempts      int
	ErrorCode     string
	Refusal       string
	UpstreamErr   string
	CostMicros    int64 // what the call cost at the model's price, in micro-units of pricing.currency
	// UsageEstimated names why the settled usage is an upper bound rather than the
	// platform's figure; "" when it is the platform's (see docs/accounting.md).
	UsageEstimated string
	TraceID        string // set when the request was traced
	// UpstreamModel is the platform model a weighted route chose; "" without routes.
	UpstreamModel string
	// EndUser and Tags are the request's attribution (issue 28), labels already bounded and
	// safe to log (see Attribution); Tags written "k=v,k2=v2" (Attribution); "" when none.
	EndUser string
	Tags    string
	// Transport is "websocket" for a turn of the Responses WebSocket mode; "" over HTTP.
	Transport string
	// Outcome is "crashed" for a call a replica was killed holding, charged by its next
	// start (docs/accounting.md); "" for every request a running process answered.
	Outcome string
	// Turns is, for a Responses WebSocket connection (summarised when it closes), the turns
	// it served; 0 for any other request.
	Turns int
}

// Platform key states, as /metrics and /admin/usage show them.
const (
	KeyHealthy = "healthy"
	KeyCooling = "cooling" // rate-limited by the platform: unused until its Retry-After passed
	KeyOut     = "out"     // rejected by the platform (401/403): unused until a probe after back-off
)

// KeyStates lists every state a platform key can be in, in the order metrics export them.
func KeyStates() []string { return []string{KeyHealthy, KeyCooling, KeyOut} }

// KeyState is one platform key's state, for metrics and the usage report.
type KeyState struct {
	Team        string `json:"-"`
	Fingerprint string `json:"fingerprint"`
	State       string `json:"state"` // KeyHealthy, KeyCooling or KeyOut
	InFlight    int64  `json:"in_flight"`
}

// Printable returns at most max bytes of s with anything outside printable ASCII replaced by
// '?': how a caller's own text (a model name, a path, a parameter name) may appear in a log
// line or an error message.
func Printable(s string, max int) string {
	if len(s) <= max && printableASCII(s) {
		return s // the common case: no copy
	}
	out := make([]byte, 0, min(len(s), max))
	for i := 0; i < len(s) && len(out) < max; i++ {
		ch := s[i]
		if ch < 0x20 || ch > 0x7e {
			ch = '?'
		}
		out = append(out, ch)
	}
	return string(out)
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

package reqlog

import "time"

// Record is what one request tells the access log and the metrics, filled in by the layer
// that learns each thing: the route and the caller at admission, the model and stream flag
// by the preflight, attempts and failures by the upstream calls, the time to first byte and
// a client that left by the relay, the usage and cost by accounting. Plain values: no HTTP
// framework and no server behind it, so it is handed explicitly to the parts that fill it.
type Record struct {
	Start time.Time
	// RequestID is modelgate's own id for the request, always made here: it is sent to the
	// platform and keys what is billed and logged, so a caller must not choose it.
	RequestID string
	// ClientRequestID is the caller's own X-Request-Id, kept only to be logged beside
	// RequestID: bounded and made plain before it is set (see proxy), "" when none was sent.
	ClientRequestID string
	Route           string // the route pattern, never the raw path
	Team, Key       string // who asked (the key's name, never its secret)
	// RuntimeTeam says Team was created through the admin API, not in the config: metrics
	// label its calls by its name all the same (bounded there).
	RuntimeTeam bool
	Model       string // as the client named it; capped when logged
	Stream      bool
	// UpstreamModel is the platform model a weighted route chose for the call (issue 27);
	// "" when the model has no routes. Configured, so bounded.
	UpstreamModel string
	// ServedModel is the model id that served the answer when a fallback did (issue 27);
	// "" when the model asked for served it. Prices, history and calibration go by it.
	ServedModel string

	// Attribution (issue 28), set by the preflight from the body, the x-modelgate-tags
	// header and the key's default tags: the end user the request names (chat's and
	// Responses' `user`, Messages' metadata.user_id), and the tags kept after the
	// usage.tag_keys allow-list, written "k:v,k2:v2" (read them with CutTag). Both are
	// labels, bounded before they are set, and share one allocation (Attribution); "" when
	// none.
	EndUser string
	Tags    string

	// InputEstimate is modelgate's first estimate of the input tokens of one of the
	// request's platform calls (package tokens), what calibration compares the platform's
	// figure with; InputReserved is the input part of its whole reservation (all its calls,
	// calibrated, with margin).
	InputEstimate, InputReserved int64

	// Usage as settled (see package accounting), and what it cost.
	InputTokens, OutputTokens     int64
	CachedTokens, ReasoningTokens int64
	CostMicros                    int64
	UsageEstimated                string // why the usage is an estimate; "" when it is the platform's figure
	Admitted                      bool   // the limiter admitted the call: it settles once
	BilledLater                   bool   // a background job settles and bills it when it ends
	Attempts                      int
	ErrCode                       string
	Refusal                       string        // limit refusal reason, if any
	TTFB                          time.Duration // time to first byte of a stream, when there was one
	UpstreamErr                   string        // kind of upstream failure: dial, timeout, status_5xx, ...
	ClientClosed                  bool          // the client left before its answer was complete
	// Transport is "websocket" for a turn of the Responses WebSocket mode; "" over HTTP.
	Transport string
	// Turns is, for a Responses WebSocket connection, the turns it served in its life.
	Turns int
}

// ForAttempt is the record of one attempt of r's request that is settled and billed on its
// own (an attempt a fallback abandoned, issue 42): r's request as it is (the caller, the
// model asked, its route, the end user, the tags, the estimates, and any field added later,
// since the record is copied whole), naming the model the attempt was sent to and how it
// failed, admitted, and with none of r's outcome.
func (r *Record) ForAttempt(model, failure string) Record {
	a := r.Derive()
	a.ServedModel, a.UpstreamErr, a.Admitted = model, failure, true
	return a
}

// Derive is a record of r's request that has not ended yet: r whole but for what its end
// sets (the usage and cost as settled, the outcome, the attempts, the model that served it),
// which are zero. A background job's record starts from its submission's this way.
func (r *Record) Derive() Record {
	a := *r
	a.ServedModel = ""
	a.InputTokens, a.OutputTokens, a.CachedTokens, a.ReasoningTokens, a.CostMicros = 0, 0, 0, 0, 0
	a.UsageEstimated, a.Admitted, a.BilledLater, a.Attempts = "", false, false, 0
	a.ErrCode, a.Refusal, a.TTFB, a.UpstreamErr, a.ClientClosed, a.Turns = "", "", 0, "", false, 0
	return a
}

// Tag is one request tag (issue 28), its key one of usage.tag_keys.
type Tag struct{ Key, Value string }

// PricedModel is the model the request's usage belongs to: the one that served it.
func (r *Record) PricedModel() string {
	if r.ServedModel != "" {
		return r.ServedModel
	}
	return r.Model
}

// Summary is the record of the finished request: its figures with the method and final
// status the HTTP layer knows, the model capped at maxModel printable bytes.
func (r *Record) Summary(method string, status int, maxModel int) RequestSummary {
	return RequestSummary{
		RequestID: r.RequestID, ClientRequestID: r.ClientRequestID, Route: r.Route, Method: method,
		Team: r.Team, Key: r.Key, Model: Printable(r.Model, maxModel), ServedModel: r.ServedModel, Status: status, Stream: r.Stream,
		Duration: time.Since(r.Start), TTFB: r.TTFB,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, InputReserved: r.InputReserved, Attempts: r.Attempts,
		ErrorCode: r.ErrCode, Refusal: r.Refusal, UpstreamErr: r.UpstreamErr,
		UsageEstimated: r.UsageEstimated, UpstreamModel: r.UpstreamModel, Transport: r.Transport, Turns: r.Turns,
		EndUser: r.EndUser, Tags: r.Tags, RuntimeTeam: r.RuntimeTeam,
	}
}

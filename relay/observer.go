package relay

// Observer is what a relay tells the request it serves about, as it happens. proxy's
// per-request record implements it; the relay holds no record of its own, so it never
// reaches back into the server. Each method is called on the relay's goroutine (n>1 chat
// choices: on theirs), must be cheap and must not keep the slices it is lent.
type Observer interface {
	// Event notes one upstream event the relay read: typ is its "event:" name ("" when it
	// came without one), data its data, lent until the call returns.
	Event(typ string, data []byte)
	// Sent notes one write of events that reached the client (the first one is the time
	// to first byte).
	Sent()
	// Response hands over a Responses stream's terminal event data, before the client can
	// name the response in its next turn (see ResponseObject); lent until the call returns.
	Response(terminal []byte)
	// ClientGone notes that the client left before the answer was complete.
	ClientGone()
	// UpstreamFailed names how the platform's side failed (bounded values, see
	// StreamEndKind), for the access log and the metrics.
	UpstreamFailed(kind string)
}

package upstream

// Health is what circuit breakers tell the calls: whether a platform key or an upstream
// model may be called now, and how each call went. A nil Health allows everything.
type Health interface {
	// Allow reports whether the named breaker lets a call through: always when closed, never
	// while open and cooling down, and for exactly one probe at a time when half-open.
	Allow(name string) bool
	// Report tells the named breaker how an allowed call ended: failed for the failures that
	// count against an upstream (5xx, 429 with the pool exhausted, connect and first-byte
	// timeouts, a stall before the first token), not for the client's own errors.
	Report(name string, failed bool)
}

// ModelBreaker and KeyBreaker name the breakers of an upstream model (the name the
// platform gets) and of a platform key (by its fingerprint, never the secret).
func ModelBreaker(upstreamModel string) string { return "model:" + upstreamModel }

func KeyBreaker(fingerprint string) string { return "key:" + fingerprint }

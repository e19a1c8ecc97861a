package upstream

import (
	"net/http"

	"github.com/tidwall/gjson"
)

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

// Call.Model's cap: a name longer than any configured model is no configured model.
const maxModelName = 256

// modelBreaker is the name of the breaker c's model answers to, or "" when there is none:
// breakers off, or a model the config does not list.
func (g *Gateway) modelBreaker(c *Call) string {
	if g.health == nil || len(g.models) == 0 {
		return ""
	}
	model := c.Model
	if model == "" {
		model = gjson.GetBytes(c.Body, "model").String()
	}
	if len(model) > maxModelName {
		return ""
	}
	return g.models[model]
}

// ModelFailed says whether a call's outcome counts against its model's breaker: 5xx
// (including modelgate's own 502 and 504 for an unreachable or silent platform) and a 429
// that outlived the key pool's failover do; the client's own errors and a success count as
// a success. judged is false for outcomes that say nothing about the model: the caller
// left, or the platform refused modelgate's credential.
func ModelFailed(f *Failure) (failed, judged bool) {
	switch {
	case f == nil:
		return false, true
	case f.ClientGone || f.Kind == "upstream_auth" || f.Kind == KindBreakerOpen:
		return false, false
	}
	return f.Status >= 500 || f.Status == http.StatusTooManyRequests, true
}

// KindBreakerOpen is the Failure kind of a call refused because its model's breaker is
// open: nothing was sent.
const KindBreakerOpen = "breaker_open"

const breakerOpenBody = `{"error":{"message":"The model is failing at the platform, so modelgate holds calls to it for a short while. Try again shortly.","type":"server_error","param":null,"code":"model_unavailable"}}`

// breakerOpen is the answer to a call whose model's breaker is open: a 503 the client may
// retry, sent without reaching the platform.
func breakerOpen() *Failure {
	return &Failure{Status: http.StatusServiceUnavailable, Kind: KindBreakerOpen, Body: []byte(breakerOpenBody),
		Header: http.Header{"X-Should-Retry": []string{"true"}}}
}

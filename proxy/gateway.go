package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/apierr"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/upstream"
)

// trail is where ri's platform calls report: attempts made, the wait for the overhead
// header when it is on, and the request's span as the parent of each attempt's.
func (ri *requestInfo) trail() upstream.Trail {
	tr := upstream.Trail{RequestID: ri.RequestID, Attempts: &ri.Attempts}
	if ri.trace != nil {
		tr.Span = ri.trace.Span()
	}
	if ri.KeepWait {
		tr.Wait = &ri.UpstreamWait
	}
	return tr
}

// chargeFailed sets ch to what the failed gateway call f costs (Failure.Charge: nothing when
// a fallback chain settled it already). Every route charges its failure here. Out of line:
// the charge it builds would otherwise take room in a frame that stays on the stack while
// the platform is awaited.
//
//go:noinline
func chargeFailed(ch *accounting.Charge, f *upstream.Failure, reserve ratelimit.Usage) {
	*ch = f.Charge(reserve)
}

// writeFailure answers a failed gateway call in the route's dialect (apierr.WriteFailure).
func writeFailure(c *gin.Context, f *upstream.Failure) { apierr.WriteFailure(c, f) }

// upstreamFailed answers a failure to read an upstream answer after it started.
func (s *Server) upstreamFailed(c *gin.Context, err error) {
	writeFailure(c, upstream.TransportFailure(err))
}

// KeyStates reports every team's platform keys by fingerprint, sorted by team, for metrics.
func (s *Server) KeyStates() []reqlog.KeyState {
	return s.state().gateway.KeyStates()
}

package tracing

import (
	"context"
	"net/http"

	"modelgate/reqlog"
)

// StartRoute is StartRequest for a request of route (the router's pattern, "" when none
// matched): nil for the probes and the metrics scrape, whose spans would drown the traces
// that matter.
func (t *Tracer) StartRoute(ctx context.Context, r *http.Request, route string) *Request {
	switch route {
	case "/healthz", "/readyz", "/metrics":
		return nil
	case "":
		route = "unknown"
	}
	return t.StartRequest(ctx, r, route)
}

// EndRequest ends the request's span (End) with the outcome its access-log summary states.
// clientGone says the client left first; cutByShutdown that its connection was lost during
// a shutdown, most likely closed by the drain's timeout.
func (q *Request) EndRequest(sum *reqlog.RequestSummary, clientGone, cutByShutdown bool) (traceID string) {
	return q.End(Outcome{
		Method: sum.Method, RequestID: sum.RequestID, Status: sum.Status, Team: sum.Team, KeyName: sum.Key,
		Attempts: sum.Attempts, LimitReason: sum.Refusal, Stream: sum.Stream, TTFB: sum.TTFB,
		ErrorCode: sum.ErrorCode, UpstreamError: sum.UpstreamErr, ServedModel: sum.ServedModel, ClientGone: clientGone,
		CutByShutdown: cutByShutdown, InputTokens: sum.InputTokens, OutputTokens: sum.OutputTokens,
	})
}

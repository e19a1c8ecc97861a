package tracing

import (
	"context"
	"fmt"
	"testing"

	"modelgate/reqlog"
)

// The probes and the scrape get no span; a request no route matched is traced as "unknown".
func TestStartRoute(t *testing.T) {
	tr, _ := newRequestTracer(t, 0)
	for _, route := range []string{"/healthz", "/readyz", "/metrics"} {
		if q := tr.StartRoute(context.Background(), incoming(""), route); q != nil {
			t.Errorf("%s traced", route)
		}
	}
	q := tr.StartRoute(context.Background(), incoming(""), "")
	if q == nil || q.route != "unknown" {
		t.Fatalf("an unmatched request: %+v", q)
	}
	q.End(Outcome{Status: 404})
}

// A request's span ends with what its access-log summary states.
func TestEndRequest(t *testing.T) {
	tr, exp := newRequestTracer(t, 0)
	q := tr.StartRoute(context.Background(), incoming(""), "/v1/responses")
	sum := &reqlog.RequestSummary{Method: "POST", RequestID: "req_1", Status: 499, Team: "search", Key: "app",
		Attempts: 2, ErrorCode: "upstream_timeout", UpstreamErr: "timeout", ServedModel: "small"}
	q.EndRequest(sum, true, true)
	got := attrsOf(endedSpan(t, tr, exp))
	for k, want := range map[string]string{AttrRequestID: "req_1", AttrTeam: "search", AttrKeyName: "app", AttrAttempts: "2",
		AttrErrorCode: "upstream_timeout", AttrServedModel: "small"} {
		if g := fmt.Sprint(got[k].AsInterface()); g != want {
			t.Errorf("%s = %q, want %q", k, g, want)
		}
	}
}

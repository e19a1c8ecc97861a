package metrics

import (
	"testing"

	"modelgate/reqlog"
)

func TestSpendTotal(t *testing.T) {
	m := New(labelConfig())
	h := m.Hooks()
	serve(h, reqlog.RequestSummary{Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini", Status: 200, CostMicros: 1_500_000})
	serve(h, reqlog.RequestSummary{Route: "/v1/responses", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini", Status: 200, CostMicros: 250})
	serve(h, reqlog.RequestSummary{Route: "/v1/responses", Team: "beta", Key: "beta-1", Model: "gpt-4o-mini", Status: 429})
	if got := counterValue(t, m, "modelgate_spend_total", map[string]string{"team": "alpha", "model": "gpt-4o-mini"}); got != 1.50025 {
		t.Errorf("alpha spend %v, want 1.50025", got)
	}
	if n := seriesCount(t, m, "modelgate_spend_total"); n != 1 {
		t.Errorf("%d spend series; a call that cost nothing adds none", n)
	}
}

package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/calibration"
	"modelgate/config"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func TestEstimatesExported(t *testing.T) {
	m := New(&config.Config{Models: []config.Model{configModel("gpt-4o-mini"), configModel("claude-x")}})
	tb := calibration.New(nil, nil, nil)
	for range 8 {
		tb.Observe("alpha", "gpt-4o-mini", 100, 150)
		tb.Observe("alpha", "gpt-4o-mini", 100, 250)
		tb.Observe("alpha", "caller-named-model", 100, 300)
	}
	m.WatchEstimates(tb)
	body := scrape(t, m)
	for _, want := range []string{
		`modelgate_estimate_ratio{model="gpt-4o-mini"} 1.8`,
		`modelgate_estimate_spread{model="gpt-4o-mini"} 0.25`,
		`modelgate_estimate_samples{model="gpt-4o-mini"} 16`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, grepLines(body, "modelgate_estimate"))
		}
	}
	for _, unwanted := range []string{"caller-named-model", `model="claude-x"`, `model="other"`} {
		if strings.Contains(body, unwanted) {
			t.Errorf("%s exported:\n%s", unwanted, grepLines(body, "modelgate_estimate"))
		}
	}

	// A reload that adds the model exports it at the next scrape; the table is read then.
	m.Reload(&config.Config{Models: []config.Model{configModel("gpt-4o-mini"), configModel("caller-named-model")}})
	tb.Observe("alpha", "gpt-4o-mini", 100, 200)
	body = scrape(t, m)
	for _, want := range []string{`modelgate_estimate_samples{model="caller-named-model"} 8`, `modelgate_estimate_samples{model="gpt-4o-mini"} 17`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("after the reload, missing %s in:\n%s", want, grepLines(body, "modelgate_estimate"))
		}
	}
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

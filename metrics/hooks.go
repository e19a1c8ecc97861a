package metrics

import (
	"strings"

	"modelgate/reqlog"
)

// Hooks returns the observers to hand to proxy.Deps.
func (m *Metrics) Hooks() reqlog.Hooks {
	return reqlog.Hooks{
		RequestStarted: m.inFlight.Inc,
		RequestDone:    m.requestDone,
		StreamOpened:   func(r string) { m.openStreams.WithLabelValues(route(r)).Inc() },
		StreamClosed:   func(r string) { m.openStreams.WithLabelValues(route(r)).Dec() },
		Fallback:       m.fallback,
	}
}

// Refusal values the proxy reports that are not refusals.
const (
	shadowPrefix    = "shadow_"
	storeAllowedRef = "store_unavailable_allowed"
)

func (m *Metrics) requestDone(s reqlog.RequestSummary) {
	m.inFlight.Dec()
	m.relabel.RLock() // see Metrics.relabel
	defer m.relabel.RUnlock()
	lt := m.labels.Load()
	rt := route(s.Route)
	team := m.teamLabel(lt, s.Team, s.RuntimeTeam)
	model := lt.model(s.Model)

	m.requests.WithLabelValues(rt, team, m.keyLabel(lt, s.Team, team, s.Key), model, status(s.Status)).Inc()
	m.routeCall(lt, &s)
	m.duration.WithLabelValues(rt).Observe(s.Duration.Seconds())
	if s.Stream && s.TTFB > 0 {
		m.ttfb.WithLabelValues(rt).Observe(s.TTFB.Seconds())
	}
	if s.InputTokens > 0 {
		m.tokens.WithLabelValues(team, model, "input").Add(float64(s.InputTokens))
	}
	if s.OutputTokens > 0 {
		m.tokens.WithLabelValues(team, model, "output").Add(float64(s.OutputTokens))
	}
	if s.CostMicros > 0 {
		m.spend.WithLabelValues(team, model).Add(float64(s.CostMicros) / 1e6)
	}
	switch r := s.Refusal; {
	case r == "":
	case r == storeAllowedRef:
		m.storeFailOpen.Inc()
	case strings.HasPrefix(r, shadowPrefix):
		m.shadowRefusals.WithLabelValues(team, word(strings.TrimPrefix(r, shadowPrefix))).Inc()
	default:
		m.refusals.WithLabelValues(team, word(r)).Inc()
	}
	if s.UpstreamErr != "" {
		m.upstreamErrors.WithLabelValues(rt, word(s.UpstreamErr)).Inc()
	}
	if s.Attempts > 1 {
		m.upstreamRetries.WithLabelValues(rt).Add(float64(s.Attempts - 1))
	}
	if s.UsageEstimated != "" {
		m.usageEstimated.WithLabelValues(rt, word(s.UsageEstimated)).Inc()
	}
}

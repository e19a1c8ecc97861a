package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/reqlog"
)

// routingMetrics are issue 45's series of model routing: the moves down a fallback chain
// and the calls of each weighted route.
type routingMetrics struct {
	fallbacks  *prometheus.CounterVec
	routeCalls *prometheus.CounterVec
}

func newRoutingMetrics(reg *prometheus.Registry) routingMetrics {
	r := routingMetrics{
		fallbacks: counterVec("modelgate_fallbacks_total",
			"Calls moved to a fallback model, by the client's model id, the fallback that took the call and why it moved.",
			"model", "served_model", "reason"),
		routeCalls: counterVec("modelgate_route_calls_total",
			"Calls of a model with weighted routes, by the model that served them and the upstream model of the route chosen.",
			"model", "upstream_model"),
	}
	reg.MustRegister(r.fallbacks, r.routeCalls)
	return r
}

// fallbackReasons are the reason label's values; anything else counts as "other".
var fallbackReasons = map[string]bool{
	reqlog.FallbackStatus5xx: true, reqlog.FallbackStatus429: true, reqlog.FallbackTimeout: true,
	reqlog.FallbackUnreachable: true, reqlog.FallbackFirstTokenTimeout: true, reqlog.FallbackBreakerOpen: true,
	reqlog.FallbackContextLength: true,
}

// fallback counts one move of a call of model to served. Both are configured ids when the
// chain is the config's; anything else is folded as every model label is.
func (m *Metrics) fallback(model, served, reason string) {
	if !fallbackReasons[reason] {
		reason = reqlog.FallbackOther
	}
	m.relabel.RLock() // see Metrics.relabel
	defer m.relabel.RUnlock()
	lt := m.labels.Load()
	m.routing.fallbacks.WithLabelValues(lt.model(model), lt.model(served), reason).Inc()
}

// routeCall counts a finished call that a weighted route served: model is the model whose
// routes chose (the fallback's when one served), upstream the route's upstream model. The
// caller holds m.relabel for reading.
func (m *Metrics) routeCall(lt *labelTable, s *reqlog.RequestSummary) {
	if s.UpstreamModel == "" {
		return
	}
	model := s.Model
	if s.ServedModel != "" {
		model = s.ServedModel
	}
	model = lt.model(model)
	up := s.UpstreamModel
	if !lt.routes[model][up] {
		up = otherModel
	}
	m.routing.routeCalls.WithLabelValues(model, up).Inc()
}

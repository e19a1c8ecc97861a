package reqlog

import (
	"math"
	"sort"
	"time"
)

// WindowFigures are a model's requests over a period: how many, how many failed (IsError),
// and the median and 95th percentile of their durations in milliseconds (upper bounds of
// 25%-wide buckets).
type WindowFigures struct {
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	P50Ms     float64 `json:"p50_ms"`
	P95Ms     float64 `json:"p95_ms"`
}

// ModelFigures are one client model id's figures of the last hour and of the UTC day.
type ModelFigures struct {
	Model string        `json:"model"`
	Hour  WindowFigures `json:"last_hour"`
	Today WindowFigures `json:"today"`
}

// RouteCalls counts today's calls of one weighted route of a model.
type RouteCalls struct {
	Model         string `json:"model"`
	UpstreamModel string `json:"upstream_model"`
	Calls         int64  `json:"calls"`
}

// FallbackCount counts today's moves of a model's calls to one fallback, for one reason.
type FallbackCount struct {
	Model       string `json:"model"`
	ServedModel string `json:"served_model"`
	Reason      string `json:"reason"`
	Count       int64  `json:"count"`
}

// WindowSnapshot is a Window read at one instant.
type WindowSnapshot struct {
	Models    []ModelFigures  `json:"models"`
	Routes    []RouteCalls    `json:"routes"`
	Fallbacks []FallbackCount `json:"fallbacks"`
	// Recent are the last requests, newest first; only team's when a team was asked for.
	Recent []RecentRequest `json:"recent"`
}

// Snapshot reads the window at now: the last hour is the 60 minutes up to now's. team, when
// not "", keeps only that team's recent requests; limit caps them (at most RecentCap).
func (w *Window) Snapshot(now time.Time, team string, limit int) WindowSnapshot {
	now = now.UTC()
	minute := now.Unix() / 60
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	out := WindowSnapshot{Models: []ModelFigures{}, Routes: []RouteCalls{}, Fallbacks: []FallbackCount{}, Recent: []RecentRequest{}}
	for id, m := range w.models {
		var hour latencyHist
		var n, errs int64
		for i := range m.minutes {
			s := &m.minutes[i]
			if s.requests > 0 && s.minute > minute-60 && s.minute <= minute {
				n += s.requests
				errs += s.errs
				hour.merge(&s.lat)
			}
		}
		if n == 0 && m.requests == 0 {
			continue
		}
		out.Models = append(out.Models, ModelFigures{Model: id, Hour: figures(&hour, n, errs), Today: figures(&m.lat, m.requests, m.errs)})
	}
	sort.Slice(out.Models, func(i, j int) bool { return out.Models[i].Model < out.Models[j].Model })
	for k, n := range w.routes {
		out.Routes = append(out.Routes, RouteCalls{Model: k[0], UpstreamModel: k[1], Calls: n})
	}
	sort.Slice(out.Routes, func(i, j int) bool {
		a, b := out.Routes[i], out.Routes[j]
		return a.Model < b.Model || a.Model == b.Model && a.UpstreamModel < b.UpstreamModel
	})
	for k, n := range w.fallbacks {
		out.Fallbacks = append(out.Fallbacks, FallbackCount{Model: k[0], ServedModel: k[1], Reason: k[2], Count: n})
	}
	sort.Slice(out.Fallbacks, func(i, j int) bool {
		a, b := out.Fallbacks[i], out.Fallbacks[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if a.ServedModel != b.ServedModel {
			return a.ServedModel < b.ServedModel
		}
		return a.Reason < b.Reason
	})
	limit = min(max(limit, 0), len(w.recent))
	size := w.next
	if w.filled {
		size = len(w.recent)
	}
	for i := 1; i <= size && len(out.Recent) < limit; i++ {
		r := w.recent[(w.next-i+len(w.recent))%len(w.recent)]
		if team == "" || r.Team == team {
			out.Recent = append(out.Recent, r)
		}
	}
	return out
}

func figures(h *latencyHist, n, errs int64) WindowFigures {
	f := WindowFigures{Requests: n, Errors: errs}
	if n > 0 {
		f.ErrorRate = math.Round(float64(errs)/float64(n)*10000) / 10000
		f.P50Ms, f.P95Ms = h.quantileMs(0.5, n), h.quantileMs(0.95, n)
	}
	return f
}

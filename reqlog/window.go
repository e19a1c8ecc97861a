package reqlog

import (
	"sync"
	"time"
)

// Window is what this replica saw of its recent model calls, for the dashboard's health
// view (issue 45): per client model id, the requests, errors and latencies of the last hour
// (a minute at a time) and of the UTC day; the calls of weighted routes and the fallbacks
// taken today; and the metadata of the last requests, never a prompt or a body. It keeps
// fixed-size figures per configured model (SetModels bounds the ids; any other is "other"),
// so its memory does not grow with traffic. Safe for concurrent use; the zero value is not
// usable, make one with NewWindow.
type Window struct {
	mu     sync.Mutex
	known  map[string]bool
	models map[string]*modelWindow
	day    int64 // the UTC day (days since 1970) the day figures count
	// routes and fallbacks are today's counts, keyed by their labels.
	routes    map[[2]string]int64
	fallbacks map[[3]string]int64
	recent    []RecentRequest // a ring of the last len(recent) requests
	next      int             // where the next one goes
	filled    bool            // the ring went round once
}

// RecentCap is how many requests a Window keeps for the recent-requests table.
const RecentCap = 200

// otherModel holds the requests that named no configured model.
const otherModel = "other"

// minuteSlot is one minute's figures; slots are reused when their minute is an hour old.
type minuteSlot struct {
	minute         int64
	requests, errs int64
	lat            latencyHist
}

type modelWindow struct {
	minutes        [60]minuteSlot
	requests, errs int64 // today
	lat            latencyHist
}

// RecentRequest is one request of the recent-requests table: who, what, how it ended. Key
// is the key's name, never its secret.
type RecentRequest struct {
	Time          time.Time `json:"time"`
	Route         string    `json:"route"`
	Team          string    `json:"team"`
	Key           string    `json:"key"`
	Model         string    `json:"model"`
	ServedModel   string    `json:"served_model"`
	UpstreamModel string    `json:"upstream_model,omitempty"`
	Status        int       `json:"status"`
	Stream        bool      `json:"stream"`
	InputTokens   int64     `json:"input_tokens"`
	OutputTokens  int64     `json:"output_tokens"`
	CostMicros    int64     `json:"cost_micros"`
	DurationMs    float64   `json:"duration_ms"`
}

// NewWindow makes an empty window that keys figures by the model ids of models.
func NewWindow(models []string) *Window {
	w := &Window{recent: make([]RecentRequest, RecentCap), routes: map[[2]string]int64{}, fallbacks: map[[3]string]int64{}}
	w.SetModels(models)
	return w
}

// SetModels makes ids the model ids figures are kept for (a config reload); the figures of
// a model no longer listed are dropped.
func (w *Window) SetModels(ids []string) {
	known := make(map[string]bool, len(ids))
	for _, id := range ids {
		known[id] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known = known
	if w.models == nil {
		w.models = map[string]*modelWindow{}
	}
	for id := range w.models {
		if !known[id] && id != otherModel {
			delete(w.models, id)
		}
	}
}

// bound is id when it is a configured model, else "other". The caller holds w.mu.
func (w *Window) bound(id string) string {
	if w.known[id] {
		return id
	}
	return otherModel
}

// IsError says whether a finished request counts as an error of its model: a 5xx, or a
// platform failure the client was told of (a 429 of every platform key, say). The caller's
// own mistakes and local limit refusals are not the model's health.
func IsError(s *RequestSummary) bool { return s.Status >= 500 || s.UpstreamErr != "" }

// Observing is hooks with the window told of every finished request (at now) before the
// other observers hear of it: the dashboard's health view reads it (issue 45).
func (w *Window) Observing(h Hooks, now func() time.Time) Hooks {
	done := h.RequestDone
	h.RequestDone = func(sum RequestSummary) {
		w.Observe(&sum, now())
		if done != nil {
			done(sum)
		}
	}
	return h
}

// Observe adds a finished request, ended at, to the window. Requests that named no model
// (health checks, admin routes) are not model calls and are left out.
func (w *Window) Observe(s *RequestSummary, at time.Time) {
	if s.Model == "" {
		return
	}
	at = at.UTC()
	failed := IsError(s)
	minute := at.Unix() / 60
	bucket := bucketOf(s.Duration) // outside the lock: a logarithm
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(at)
	model := w.bound(s.Model)
	m := w.models[model]
	if m == nil {
		m = &modelWindow{}
		w.models[model] = m
	}
	slot := &m.minutes[minute%60]
	if slot.minute != minute {
		*slot = minuteSlot{minute: minute}
	}
	slot.requests++
	m.requests++
	if failed {
		slot.errs++
		m.errs++
	}
	slot.lat[bucket]++
	m.lat[bucket]++
	if s.UpstreamModel != "" {
		served := s.Model
		if s.ServedModel != "" {
			served = s.ServedModel
		}
		// The route belongs to the model that served the call: a fallback's routes when
		// it went to one.
		w.routes[[2]string{w.bound(served), s.UpstreamModel}]++
	}
	served := s.ServedModel
	if served != "" {
		served = w.bound(served)
	}
	w.recent[w.next] = RecentRequest{Time: at, Route: s.Route, Team: s.Team, Key: s.Key, Model: model, ServedModel: served,
		UpstreamModel: s.UpstreamModel, Status: s.Status, Stream: s.Stream, InputTokens: s.InputTokens, OutputTokens: s.OutputTokens,
		CostMicros: s.CostMicros, DurationMs: float64(s.Duration.Microseconds()) / 1000}
	w.next = (w.next + 1) % len(w.recent)
	w.filled = w.filled || w.next == 0
}

// Fallback counts one move of a call of model to its fallback served, for reason; model
// and served are bounded to the configured ids, reason by the caller (the Fallback* words).
func (w *Window) Fallback(model, served, reason string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(at.UTC())
	w.fallbacks[[3]string{w.bound(model), w.bound(served), reason}]++
}

// roll starts the day's figures afresh when at is on a later UTC day. The caller holds w.mu.
func (w *Window) roll(at time.Time) {
	day := at.Unix() / 86400
	if day <= w.day {
		return
	}
	w.day = day
	for _, m := range w.models {
		m.requests, m.errs, m.lat = 0, 0, latencyHist{}
	}
	clear(w.routes)
	clear(w.fallbacks)
}

// Package calibration learns, per model, how modelgate's first token estimate compares with
// the input tokens the platform reports, so reservations and count_tokens can use a figure
// near the truth instead of the raw estimate.
//
// # Samples
//
// A sample is r = reported / estimated: the platform's input tokens of one answered call
// over modelgate's raw first estimate of the same call. A sample whose estimate is under 8
// tokens, or whose reported count is not positive, says little and is ignored; every r is
// clamped to [0.25, 4] so one odd answer cannot swing a model's figure.
//
// # Shared and durable
//
// Samples are kept per model and per 6-hour time slot as three counters in the store
// (bucket "calibration", key "<slot>|<model>"): the number of samples n, the sum of r and
// the sum of r², both in millionths. Counters only ever grow through store.Add, so replicas
// add to one record at once without losing an update, and a restart finds them (bbolt or
// Redis). A record expires three days after its slot ends.
//
// A replica adds its samples to a local pending sum at once (no I/O on the request path)
// and writes them every Run interval; at the same interval it reloads the shared records.
// The view a Factor is read from combines the slots with weights that halve every two
// slots (a 12-hour half-life, so a model whose tokenizer changes is learned anew within
// about a day), plus the samples of this replica not yet reloaded, at full weight, so a
// sample counts on its replica at once. A table without a store (tests) keeps its samples
// at full weight for as long as it lives.
//
// # Factor
//
//   - Ratio is the weighted mean of r, shrunk towards 1 by a prior worth 4 samples at 1.0
//     (so a few samples move it only part of the way), clamped to [0.5, 3].
//   - Spread is the weighted standard deviation of r divided by its mean (the coefficient
//     of variation); it stays 0 until the view holds 8 samples.
//   - Samples is the number of samples in the view, whatever their weight.
//
// Count(raw) = round(raw × Ratio) is the best figure (count_tokens, usage estimates).
// Reserve(raw) = ceil(raw × Ratio × (1 + margin)) is what a reservation is built from; the
// margin is one Spread, capped at 0.5. A model with no samples has Factor{1, 0, 0}: the
// first estimate stands alone.
//
// # Bounds
//
// At most 256 models are calibrated per replica; a model seen when the table is full is
// not calibrated (Factor{1, 0, 0}) until a model with no samples left gives way. Model
// names over 256 bytes are ignored. Each reload reads the bucket's records, of which there
// are at most 13 slots times the models replicas calibrated within the last three days.
package calibration

import (
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"modelgate/store"
)

const (
	// minEstimate is the smallest raw estimate a sample is taken from: below it a few
	// tokens of framing decide the ratio.
	minEstimate = 8
	// minSample and maxSample bound one sample's ratio.
	minSample, maxSample = 0.25, 4.0
	// minRatio and maxRatio bound a model's calibrated ratio.
	minRatio, maxRatio = 0.5, 3.0
	// priorSamples is the weight of the prior ratio 1.0 the mean is shrunk towards.
	priorSamples = 4.0
	// minSpreadSamples is how many samples a spread needs before it is trusted.
	minSpreadSamples = 8
	// maxMargin caps the reservation margin.
	maxMargin = 0.5
	// MaxModels is how many models one table calibrates.
	MaxModels = 256
	// MaxModelLen is the longest model name calibrated.
	MaxModelLen = 256
	// micro is the fixed-point scale of the stored sums.
	micro = 1e6
)

// Factor is what a model's calibration says of its raw estimates.
type Factor struct {
	Ratio   float64 `json:"ratio"`   // calibrated tokens per raw estimated token
	Spread  float64 `json:"spread"`  // coefficient of variation of the samples; 0 until 8 samples
	Samples int64   `json:"samples"` // samples in the current view
}

// uncalibrated is the Factor of a model without samples.
func uncalibrated() Factor { return Factor{Ratio: 1} }

// ratio is f's ratio, 1 for the zero Factor: a Factor nobody filled in leaves raw as it is.
func (f Factor) ratio() float64 {
	if f.Ratio <= 0 {
		return 1
	}
	return f.Ratio
}

// Margin is the share Reserve adds on top of Count: one Spread, capped at 0.5.
func (f Factor) Margin() float64 { return math.Min(math.Max(f.Spread, 0), maxMargin) }

// Count is the best figure for raw estimated tokens: round(raw × Ratio).
func (f Factor) Count(raw int64) int64 {
	if raw <= 0 {
		return 0
	}
	return int64(math.Round(float64(raw) * f.ratio()))
}

// Reserve is what a reservation takes for raw estimated tokens: ceil(raw × Ratio × (1 +
// margin)). It is never below Count(raw).
func (f Factor) Reserve(raw int64) int64 {
	if raw <= 0 {
		return 0
	}
	x := float64(raw) * f.ratio() * (1 + f.Margin())
	// The tolerance keeps a product that is whole up to rounding (100 × 1.1) from being
	// lifted by one token.
	n := int64(math.Ceil(x - 1e-9))
	return max(n, f.Count(raw))
}

// ModelFactor is one model's Factor, as Models lists them.
type ModelFactor struct {
	Model string `json:"model"`
	Factor
}

// Table is the calibration of every model a replica has seen. It is safe for concurrent use.
type Table struct {
	st  store.Store // nil: memory only
	now func() time.Time
	log *slog.Logger

	// syncMu lets one flush or reload run at a time, so a reload never forgets samples a
	// flush has not yet written.
	syncMu sync.Mutex

	mu     sync.RWMutex
	models map[string]*entry
}

// New builds a table over st (nil: samples live in memory only). Run loads what the store
// holds and keeps it in step.
func New(st store.Store, now func() time.Time, log *slog.Logger) *Table {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if st != nil {
		// Nobody polls this bucket's version; on Redis a bump would cost a command per write.
		st.Unversioned(bucket)
	}
	return &Table{st: st, now: now, log: log, models: map[string]*entry{}}
}

// Observe records one answered call: estimated is modelgate's raw first estimate of its
// input, reported what the platform counted. It takes no I/O and no allocation once the
// model is known.
func (t *Table) Observe(model string, estimated, reported int64) {
	if estimated < minEstimate || reported <= 0 || model == "" || len(model) > MaxModelLen {
		return
	}
	r := min(max(float64(reported)/float64(estimated), minSample), maxSample)
	s := sums{n: 1, r: int64(math.Round(r * micro)), r2: int64(math.Round(r * r * micro))}
	for {
		e := t.entry(model, true)
		if e == nil {
			return // the table is full
		}
		if e.add(s) {
			return
		}
		// A reload dropped the entry between the lookup and the add: look it up again.
	}
}

// Factor is model's calibration now. It takes no I/O and no allocation.
func (t *Table) Factor(model string) Factor {
	e := t.entry(model, false)
	if e == nil {
		return uncalibrated()
	}
	e.mu.Lock()
	v := e.view()
	e.mu.Unlock()
	return v.factor()
}

// Models lists every calibrated model's Factor, sorted by model.
func (t *Table) Models() []ModelFactor {
	t.mu.RLock()
	out := make([]ModelFactor, 0, len(t.models))
	for name, e := range t.models {
		e.mu.Lock()
		v := e.view()
		e.mu.Unlock()
		if v.n > 0 {
			out = append(out, ModelFactor{Model: name, Factor: v.factor()})
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b ModelFactor) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// entry returns model's entry; with create, it makes one if the table has room.
func (t *Table) entry(model string, create bool) *entry {
	t.mu.RLock()
	e := t.models[model]
	t.mu.RUnlock()
	if e != nil || !create {
		return e
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e = t.models[model]; e == nil && len(t.models) < MaxModels {
		e = &entry{}
		// A copy: the caller's string may point into a large request body.
		t.models[strings.Clone(model)] = e
	}
	return e
}

// sums are samples as the store keeps them: a count and fixed-point sums of r and r².
type sums struct{ n, r, r2 int64 }

func (s *sums) add(o sums) { s.n, s.r, s.r2 = s.n+o.n, s.r+o.r, s.r2+o.r2 }
func (s *sums) sub(o sums) { s.n, s.r, s.r2 = s.n-o.n, s.r-o.r, s.r2-o.r2 }

// view is a weighted set of samples: total weight, weighted sums of r and r², and the
// number of samples whatever their weight.
type view struct {
	w, r, r2 float64
	n        int64
}

// addSums adds s at weight w.
func (v *view) addSums(s sums, w float64) {
	v.w += w * float64(s.n)
	v.r += w * float64(s.r) / micro
	v.r2 += w * float64(s.r2) / micro
	v.n += s.n
}

func (v view) factor() Factor {
	if v.n <= 0 || v.w <= 0 {
		return uncalibrated()
	}
	f := Factor{Ratio: (v.r + priorSamples) / (v.w + priorSamples), Samples: v.n}
	f.Ratio = min(max(f.Ratio, minRatio), maxRatio)
	if v.n >= minSpreadSamples {
		mean := v.r / v.w
		// Below a millionth's square the variance is the rounding of the stored sums.
		if variance := v.r2/v.w - mean*mean; variance > 1e-12 && mean > 0 {
			f.Spread = math.Sqrt(variance) / mean
		}
	}
	return f
}

// entry is one model's samples.
type entry struct {
	mu sync.Mutex
	// shared is the store's view at the last reload.
	shared view
	// pending are samples observed here and not yet written; unsynced those written (or
	// being written) since the last reload, which the shared view does not hold yet.
	pending, unsynced sums
	// gone marks an entry a reload dropped, so an Observe that found it just before
	// looks again.
	gone bool
}

// add adds s to the pending samples, unless a reload has dropped the entry.
func (e *entry) add(s sums) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone {
		return false
	}
	e.pending.add(s)
	return true
}

// view is the entry's samples as a Factor sees them; e.mu is held.
func (e *entry) view() view {
	v := e.shared
	v.addSums(e.pending, 1)
	v.addSums(e.unsynced, 1)
	return v
}

// Package calibration learns, per model and per team, how modelgate's first token estimate
// compares with the input tokens the platform reports, so reservations and count_tokens can
// use a figure near the truth instead of the raw estimate.
//
// # Samples
//
// A sample is r = reported / estimated: the platform's input tokens of one answered call
// over modelgate's raw first estimate of the same call. A sample whose estimate is under 8
// tokens, or whose reported count is not positive, says little and is ignored; every r is
// clamped to [0.25, 4] so one odd answer cannot swing a figure.
//
// # Per team, with a shared prior
//
// Samples are kept per team and model: a team's own calls set its ratio, so one team cannot
// move another's reservations with calls of its own (issue 40). Passthrough callers, who
// have no team, are the team "". What the teams learn is pooled into a per-model prior that
// fills in where a team has few samples of its own:
//
//   - A team's own ratio R_t is the weighted mean of its samples shrunk towards 1 by a prior
//     worth 4 samples, clamped to [0.5, 3].
//   - The shared prior of a model is S = (Σ u_t·R_t + 24) / (Σ u_t + 24) over the other
//     teams: each votes with its own ratio at a weight u_t = w_t/(w_t+4) below 1 however
//     many samples it has, against 24 votes for 1.0. A team counts as one voter, not as its
//     number of calls, so one team moves S by at most (3−1)/25 = 8% up or (1−0.5)/25 = 2%
//     down from 1, and by no more (8% up, about 2% down) from wherever the other teams put
//     it: more voters dilute a vote. It takes many teams agreeing to move the prior far. A team's own vote is left out of its
//     prior, so a team alone on a model is calibrated exactly as a model was before teams.
//   - A team's Factor blends its samples with the prior: Ratio = (Σ w·r + 4·S) / (w + 4)
//     (the weight of its own mean is n/(n+4)), clamped to [0.5, 3]; a team with no samples
//     has Ratio = S. Spread comes from the team's own samples only, so another team's calls
//     move a team's reservation only through S, and by no larger a share than S moves:
//     under 10%, up to the rounding of a token.
//
// # Shared and durable
//
// Samples are kept per team, model and 6-hour time slot as three counters in the store
// (bucket "calibration_teams", key "<slot>|<team>|<model>"): the number of samples n, the
// sum of r and the sum of r², both in millionths. Counters only ever grow through
// store.Add, so replicas add to one record at once without losing an update, and a restart
// finds them (bbolt or Redis). A record expires three days after its slot ends.
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
//   - Ratio is as above.
//   - Spread is the weighted standard deviation of the team's r divided by its mean (the
//     coefficient of variation); it stays 0 until the team's view holds 8 samples.
//   - Samples is the number of the team's samples in the view, whatever their weight.
//
// Count(raw) = round(raw × Ratio) is the best figure (count_tokens, usage estimates).
// Reserve(raw) = ceil(raw × Ratio × (1 + margin)) is what a reservation is built from; the
// margin is one Spread, capped at 0.5. A model no team has samples of has Factor{1, 0, 0}:
// the first estimate stands alone.
//
// # Bounds
//
// At most 256 models are calibrated per replica, and at most 256 teams per model; a model
// or team seen when its table is full is not calibrated until one with no samples left
// gives way (a team that finds no room reads the prior). Model names over 256 bytes and
// team names over 64 bytes (config allows 64) or holding '|' are ignored. Each reload reads
// the bucket's records, of which there are at most 13 slots times the (team, model) pairs
// replicas calibrated within the last three days.
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
	// minRatio and maxRatio bound a calibrated ratio.
	minRatio, maxRatio = 0.5, 3.0
	// priorSamples is the weight, in samples, of the prior a team's mean is shrunk towards.
	priorSamples = 4.0
	// priorTeams is the weight, in teams, of the 1.0 the shared prior is shrunk towards:
	// what keeps one team from moving it more than (maxRatio-1)/(priorTeams+1).
	priorTeams = 24.0
	// minSpreadSamples is how many samples a spread needs before it is trusted.
	minSpreadSamples = 8
	// maxMargin caps the reservation margin.
	maxMargin = 0.5
	// MaxModels is how many models one table calibrates.
	MaxModels = 256
	// MaxTeams is how many teams one model is calibrated for.
	MaxTeams = 256
	// MaxModelLen is the longest model name calibrated.
	MaxModelLen = 256
	// MaxTeamLen is the longest team name calibrated (config's own bound).
	MaxTeamLen = 64
	// micro is the fixed-point scale of the stored sums.
	micro = 1e6
)

// Factor is what a team's calibration of a model says of its raw estimates.
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

// ModelFactor is one model's shared figure, as Models lists them: the Factor of all teams'
// samples pooled (what the platform counts of the model whoever calls it), and Prior, the
// ratio a team with no samples of its own reserves with.
type ModelFactor struct {
	Model string `json:"model"`
	Factor
	Prior float64 `json:"prior"`
}

// Table is the calibration of every model and team a replica has seen. It is safe for
// concurrent use.
type Table struct {
	st  store.Store // nil: memory only
	now func() time.Time
	log *slog.Logger

	// syncMu lets one flush or reload run at a time, so a reload never forgets samples a
	// flush has not yet written.
	syncMu sync.Mutex

	mu     sync.RWMutex
	models map[string]*model
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
	return &Table{st: st, now: now, log: log, models: map[string]*model{}}
}

// validTeam: a team name the table keys on; "" is the passthrough callers.
func validTeam(team string) bool {
	return len(team) <= MaxTeamLen && !strings.Contains(team, "|")
}

// Observe records one answered call of team: estimated is modelgate's raw first estimate
// of its input, reported what the platform counted. It takes no I/O and no allocation once
// the team and model are known.
func (t *Table) Observe(team, model string, estimated, reported int64) {
	if estimated < minEstimate || reported <= 0 || model == "" || len(model) > MaxModelLen || !validTeam(team) {
		return
	}
	r := min(max(float64(reported)/float64(estimated), minSample), maxSample)
	s := sums{n: 1, r: int64(math.Round(r * micro)), r2: int64(math.Round(r * r * micro))}
	for {
		m := t.model(model, true)
		if m == nil {
			return // the table is full
		}
		if m.add(team, s) {
			return
		}
		// A reload dropped the model between the lookup and the add: look it up again.
	}
}

// Factor is team's calibration of model now. It takes no I/O and no allocation.
func (t *Table) Factor(team, model string) Factor {
	m := t.model(model, false)
	if m == nil {
		return uncalibrated()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var v view
	if e := m.teams[team]; e != nil {
		v = e.view()
	}
	return v.factor(m.priorFor(v))
}

// Models lists every calibrated model's shared figure, sorted by model.
func (t *Table) Models() []ModelFactor {
	t.mu.RLock()
	out := make([]ModelFactor, 0, len(t.models))
	for name, m := range t.models {
		m.mu.Lock()
		prior, pooled := m.priorFor(view{}), m.pooled()
		m.mu.Unlock()
		if pooled.n > 0 {
			out = append(out, ModelFactor{Model: name, Factor: pooled.factor(1), Prior: prior})
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b ModelFactor) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// model returns name's model; with create, it makes one if the table has room.
func (t *Table) model(name string, create bool) *model {
	t.mu.RLock()
	m := t.models[name]
	t.mu.RUnlock()
	if m != nil || !create {
		return m
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m = t.models[name]; m == nil && len(t.models) < MaxModels {
		m = &model{teams: map[string]*entry{}}
		// A copy: the caller's string may point into a large request body.
		t.models[strings.Clone(name)] = m
	}
	return m
}

// model is one model's samples, by team.
type model struct {
	mu    sync.Mutex
	teams map[string]*entry
	// ballot caches every team's vote for the prior (votes) until a sample or a reload
	// changes a team's view.
	ballot   ballot
	ballotOK bool
	// gone marks a model a reload dropped, so an Observe that found it just before looks
	// again.
	gone bool
}

// add adds s to team's pending samples, unless a reload has dropped the model. A team
// beyond MaxTeams is not calibrated.
func (m *model) add(team string, s sums) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return false
	}
	e := m.teams[team]
	if e == nil {
		if len(m.teams) >= MaxTeams {
			return true
		}
		e = &entry{}
		m.teams[strings.Clone(team)] = e
	}
	e.pending.add(s)
	m.ballotOK = false
	return true
}

// ballot is the teams' votes for a model's prior: how many voted, and the sums of their
// weights and of their weighted ratios.
type ballot struct {
	voters   int
	u, ratio float64
}

// voting: the view has samples, so its team votes for the prior.
func (v view) voting() bool { return v.n > 0 && v.w > 0 }

// vote is the vote of a team with view v, which is voting: its own ratio (shrunk towards 1,
// as factor(1) has it, without the spread) at a weight below 1.
func (v view) vote() (u, ratio float64) {
	return v.w / (v.w + priorSamples), min(max((v.r+priorSamples)/(v.w+priorSamples), minRatio), maxRatio)
}

// votes sums every team's vote; m.mu is held.
func (m *model) votes() ballot {
	if m.ballotOK {
		return m.ballot
	}
	var b ballot
	for _, e := range m.teams {
		if v := e.view(); v.voting() {
			u, r := v.vote()
			b.voters++
			b.u += u
			b.ratio += u * r
		}
	}
	m.ballot, m.ballotOK = b, true
	return b
}

// priorFor is the prior of the team whose samples are own (the zero view: a team with
// none): every other team's vote against priorTeams votes for 1 (see the package comment);
// m.mu is held. A team alone on the model has the prior 1 exactly.
func (m *model) priorFor(own view) float64 {
	b, mine := m.votes(), own.voting()
	if mine {
		b.voters--
	}
	if b.voters <= 0 {
		return 1
	}
	if mine {
		u, r := own.vote()
		b.u -= u
		b.ratio -= u * r
	}
	return min(max((priorTeams+b.ratio)/(priorTeams+b.u), minRatio), maxRatio)
}

// pooled is every team's samples together; m.mu is held.
func (m *model) pooled() view {
	var p view
	for _, e := range m.teams {
		v := e.view()
		p.w, p.r, p.r2, p.n = p.w+v.w, p.r+v.r, p.r2+v.r2, p.n+v.n
	}
	return p
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

// factor is the Factor of v's samples shrunk towards prior by priorSamples; a view
// without samples has the prior alone (with no spread).
func (v view) factor(prior float64) Factor {
	if v.n <= 0 || v.w <= 0 {
		if prior == 1 {
			return uncalibrated()
		}
		return Factor{Ratio: prior}
	}
	f := Factor{Ratio: (v.r + priorSamples*prior) / (v.w + priorSamples), Samples: v.n}
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

// entry is one team's samples of one model; its model's mu guards it.
type entry struct {
	// shared is the store's view at the last reload.
	shared view
	// pending are samples observed here and not yet written; unsynced those written (or
	// being written) since the last reload, which the shared view does not hold yet.
	pending, unsynced sums
}

// view is the entry's samples as a Factor sees them.
func (e *entry) view() view {
	v := e.shared
	v.addSums(e.pending, 1)
	v.addSums(e.unsynced, 1)
	return v
}

package billing

import (
	"context"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/store"
)

// historyBucket holds one counter record per UTC day, team, key and model, keyed
// "20261126/<team>/<key>/<model>". Team and key names cannot hold '/', so the model, last,
// may.
const historyBucket = "usage_days"

// hourlyBucket holds the same per UTC hour ("2026112608/<team>/<key>/<model>"), kept for a
// shorter time: enough to see a day's shape, not a year of hours.
const hourlyBucket = "usage_hours"

// DefaultHourlyRetention is how long hourly rows are kept unless SetHourlyRetention says.
const DefaultHourlyRetention = 7 * 24 * time.Hour

// lastUseBucket holds, per "<team>/<key>", when any replica last recorded a call of the key
// (Unix nanoseconds, decimal), so "last used" is shared by replicas and survives restarts.
const lastUseBucket = "key_last_use"

// Counter names of a history record.
const (
	cRequests  = "requests"
	cInput     = "input_tokens"
	cCached    = "cached_input_tokens"
	cOutput    = "output_tokens"
	cReasoning = "reasoning_tokens"
	cCost      = "cost_micros"
)

// Row is one day's (or hour's) usage of one team, key and model (or a sum over some of them).
type Row struct {
	Day              string // YYYY-MM-DD, UTC
	Hour             string // hourly rows: YYYY-MM-DDTHH:00:00Z, UTC; "" for daily rows
	Team, Key, Model string
	// Value is the tag's value or the end user of an attribution query (QueryAttribution):
	// NoValue for requests without one, OtherValues for those past the distinct-value cap.
	Value             string
	Requests          int64
	InputTokens       int64
	CachedInputTokens int64
	OutputTokens      int64
	ReasoningTokens   int64
	CostMicros        int64
}

func (r *Row) add(o *Row) {
	r.Requests += o.Requests
	r.InputTokens += o.InputTokens
	r.CachedInputTokens += o.CachedInputTokens
	r.OutputTokens += o.OutputTokens
	r.ReasoningTokens += o.ReasoningTokens
	r.CostMicros += o.CostMicros
}

func (r *Row) counters() map[string]int64 {
	return map[string]int64{cRequests: r.Requests, cInput: r.InputTokens, cCached: r.CachedInputTokens,
		cOutput: r.OutputTokens, cReasoning: r.ReasoningTokens, cCost: r.CostMicros}
}

// Recorder keeps the usage history. Record only adds to an in-memory batch; Run writes the
// batch to the store every interval, off the request path, as one atomic Add per row.
type Recorder struct {
	st        store.Store
	now       func() time.Time
	log       *slog.Logger
	retention time.Duration
	hourly    time.Duration // retention of hourly rows

	// flushMu keeps Query from seeing a row both in the store and in a batch being flushed.
	flushMu  sync.RWMutex
	mu       sync.Mutex
	batch    map[rowID]*Row
	batchGen uint64        // counts the batches Flush took, so attribution slots know a stale row
	failures map[rowID]int // flushes in a row that could not write the row
	dropped  atomic.Int64  // rows given up on (see maxRowFlushes)
	lastSeen map[teamKey]int64
	unsaved  map[teamKey]bool // keys used since the last flush
	days     periodNames
	hours    hourNames
	// distinct holds the values recorded today per team and attribution dimension, up to
	// maxDistinct each (see attribution.go).
	distinct    distinctValues
	maxDistinct int
	slots       attrSlots // today's named attribution rows, by what a request holds
	loadedDay   string    // the day whose named values loadDistinct read from the store
	// health hears of each flush's outcome (nil: no one).
	health *store.WriteHealth
}

// rowID names a row: period is a day (YYYYMMDD) or an hour (YYYYMMDDHH); its length tells
// which bucket a plain row belongs to. An attribution row (kind tagRow or userRow, daily
// only, in attrBucket) has no key name: key holds the tag key of a tagRow, value the tag's
// value or the end user, and other marks the row of values past the distinct-value cap.
type rowID struct {
	day, team, key, model string
	kind                  rowKind
	value                 string
	other                 bool
}

func (id rowID) hourly() bool { return len(id.day) == 10 }

// hourNames caches the current hour's name, as periodNames does days'.
type hourNames struct {
	unixHour int64
	name     string
}

func (h *hourNames) at(now time.Time) string {
	n := now.Unix() / 3600
	if h.name == "" || n != h.unixHour {
		h.unixHour, h.name = n, now.UTC().Format("2006010215")
	}
	return h.name
}

type teamKey struct{ team, key string }

// NewRecorder returns a recorder writing to st (nil: history is kept in memory until the
// process ends, which is enough for tests and for a gateway without a store).
func NewRecorder(st store.Store, retention time.Duration, now func() time.Time, log *slog.Logger) *Recorder {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{st: st, now: now, log: log, retention: retention, hourly: DefaultHourlyRetention,
		batch: map[rowID]*Row{}, failures: map[rowID]int{}, lastSeen: map[teamKey]int64{}, unsaved: map[teamKey]bool{},
		maxDistinct: DefaultDistinctValues}
}

// SetHourlyRetention sets how long hourly rows are kept; 0 or less records none. Call it
// before Run.
func (r *Recorder) SetHourlyRetention(d time.Duration) { r.hourly = d }

// Record counts one finished request, in its day's row and in its hour's.
func (r *Recorder) Record(team, key, model string, u Usage, costMicros int64) {
	r.RecordAttributed(team, key, model, u, costMicros, "", nil)
}

// RecordAttributed is Record for a request that names an end user and tags ("" and nil
// when it names none): it also counts the request in the day's row of its end user and of
// each tag, per team and model. The tags are already allow-listed and bounded; tags is not
// kept.
func (r *Recorder) RecordAttributed(team, key, model string, u Usage, costMicros int64, endUser string, tags []Tag) {
	now := r.now()
	r.mu.Lock()
	day, _ := r.days.at(now)
	day = day[1:]
	r.addTo(rowID{day: day, team: team, key: key, model: model}, u, costMicros)
	if r.hourly > 0 {
		r.addTo(rowID{day: r.hours.at(now), team: team, key: key, model: model}, u, costMicros)
	}
	if endUser != "" || len(tags) > 0 {
		r.attribute(day, team, model, endUser, tags, u, costMicros)
	}
	tk := teamKey{team, key}
	r.lastSeen[tk] = now.UnixNano()
	r.unsaved[tk] = true
	r.mu.Unlock()
}

// addTo adds one request to the batch row id; r.mu is held.
func (r *Recorder) addTo(id rowID, u Usage, costMicros int64) {
	r.batchRow(id).count(u, costMicros)
}

// batchRow is the batch's row id, made when missing; r.mu is held.
func (r *Recorder) batchRow(id rowID) *Row {
	row := r.batch[id]
	if row == nil {
		row = &Row{}
		r.batch[id] = row
	}
	return row
}

// count adds one request to the row.
func (r *Row) count(u Usage, costMicros int64) {
	r.Requests++
	r.InputTokens += u.InputTokens
	r.CachedInputTokens += u.CachedInputTokens
	r.OutputTokens += u.OutputTokens
	r.ReasoningTokens += u.ReasoningTokens
	r.CostMicros += costMicros
}

// LastUse reports when each key ("<team>/<key>") was last used, by any replica that
// flushed since, or by this one.
func (r *Recorder) LastUse(ctx context.Context) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if r.st != nil {
		err := r.st.Scan(ctx, lastUseBucket, "", func(k string, v []byte) error {
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				out[k] = time.Unix(0, n).UTC()
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for tk, n := range r.lastSeen {
		if t := time.Unix(0, n).UTC(); t.After(out[tk.team+"/"+tk.key]) {
			out[tk.team+"/"+tk.key] = t
		}
	}
	return out, nil
}

// ReportWrites has every flush's outcome told to h (its failures counted, /readyz
// degraded while they fail). Call it before Run.
func (r *Recorder) ReportWrites(h *store.WriteHealth) { r.health = h }

// Run flushes every interval until ctx ends, then flushes what is left.
func (r *Recorder) Run(ctx context.Context, every time.Duration) {
	if r.st == nil {
		return
	}
	flushEvery(ctx, every, r.log, "usage history", r.Flush, nil)
}

// Flush writes the batch to the store. Rows that fail stay for the next flush.
func (r *Recorder) Flush(ctx context.Context) error {
	if r.st == nil {
		return nil
	}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.loadDistinct(ctx)
	r.mu.Lock()
	if len(r.batch) == 0 {
		r.mu.Unlock()
		return nil
	}
	batch := r.batch
	r.batch = map[rowID]*Row{}
	r.batchGen++
	used := make(map[teamKey]int64, len(r.unsaved))
	for tk := range r.unsaved {
		used[tk] = r.lastSeen[tk]
	}
	clear(r.unsaved)
	r.mu.Unlock()
	for tk, n := range used {
		// Replicas overwrite each other here; all of them write "about now", so the last
		// writer is close enough to the last use.
		if err := r.st.Put(ctx, lastUseBucket, tk.team+"/"+tk.key, strconv.AppendInt(nil, n, 10), r.retention); err != nil {
			r.mu.Lock()
			r.unsaved[tk] = true
			r.mu.Unlock()
		}
	}
	var firstErr error
	for id, row := range batch {
		bucket := historyBucket
		switch {
		case id.kind != plainRow:
			bucket = attrBucket
		case id.hourly():
			bucket = hourlyBucket
		}
		err := r.st.Add(ctx, bucket, id.storeKey(), row.counters(), r.ttl(id.day))
		r.mu.Lock()
		if err == nil {
			delete(r.failures, id)
		} else {
			r.keepFailed(id, row, err)
		}
		r.mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	r.health.Wrote(store.WriterUsage, firstErr)
	return firstErr
}

// maxRowFlushes is how many flushes in a row may fail to write a row before it is dropped:
// five minutes at the one-second flush. A row is a sum per period, team, key and model, so
// keeping it through a store outage costs memory per row, not per request; but a row the
// store can never take (it refuses the key, say) must not be retried until the process
// ends, logging every second and growing with every request that adds to it.
const maxRowFlushes = 300

// keepFailed puts a row that could not be written back into the batch for the next flush,
// or drops it, counted and logged, once it has failed maxRowFlushes times; r.mu is held.
func (r *Recorder) keepFailed(id rowID, row *Row, err error) {
	n := r.failures[id] + 1
	if n >= maxRowFlushes {
		delete(r.failures, id)
		r.dropped.Add(1)
		r.log.Error("usage history: row dropped after repeated write failures",
			"period", id.day, "team", id.team, "key", id.key, "model", boundedName(id.model),
			"requests", row.Requests, "flushes", n, "err", err.Error())
		return
	}
	r.failures[id] = n
	if cur := r.batch[id]; cur != nil {
		cur.add(row)
	} else {
		r.batch[id] = row
	}
}

// DroppedRows is how many rows this recorder gave up writing (see maxRowFlushes): the
// requests they counted are missing from the history.
func (r *Recorder) DroppedRows() int64 { return r.dropped.Load() }

// boundedName keeps a logged name short whatever a caller chose.
func boundedName(s string) string {
	const most = 128
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}

// ttl keeps a row for the retention counted from the end of its day or hour.
func (r *Recorder) ttl(period string) time.Duration {
	layout, length, retention := "20060102", 24*time.Hour, r.retention
	if len(period) == 10 {
		layout, length, retention = "2006010215", time.Hour, r.hourly
	}
	start, err := time.Parse(layout, period)
	if err != nil || retention <= 0 {
		return 0
	}
	return max(start.Add(length+retention).Sub(r.now()), time.Minute)
}

func (id rowID) storeKey() string {
	if id.kind != plainRow {
		return id.attrStoreKey()
	}
	return id.day + "/" + id.team + "/" + id.key + "/" + id.model
}

func parseRowKey(k string) (rowID, bool) {
	parts := strings.SplitN(k, "/", 4)
	if len(parts) != 4 || (len(parts[0]) != 8 && len(parts[0]) != 10) {
		return rowID{}, false
	}
	return rowID{day: parts[0], team: parts[1], key: parts[2], model: parts[3]}, true
}

// Query returns the daily rows of the days from..to (YYYYMMDD, inclusive) summed over what
// groupBy leaves out: groupBy holds any of "team", "key", "model"; the day is always kept.
// Rows not yet flushed are included; a running flush is waited for, so none counts twice.
// Rows come sorted by day, team, key, model.
func (r *Recorder) Query(ctx context.Context, from, to string, groupBy map[string]bool) ([]Row, error) {
	return r.query(ctx, false, from, to, groupBy)
}

// QueryHours is Query for the hourly rows of the days from..to: one row per hour.
func (r *Recorder) QueryHours(ctx context.Context, from, to string, groupBy map[string]bool) ([]Row, error) {
	return r.query(ctx, true, from, to, groupBy)
}

// eachRow hands take every row the store holds under prefix of bucket (keys read by parse)
// and every row of the batch not yet flushed; take picks the ones it wants. r.flushMu is
// held by the caller, so no row is seen both in the store and in a batch being flushed.
func (r *Recorder) eachRow(ctx context.Context, bucket, prefix string, parse func(string) (rowID, bool), take func(rowID, *Row)) error {
	if r.st != nil {
		err := r.st.ScanCounters(ctx, bucket, prefix, func(k string, c map[string]int64) error {
			if id, ok := parse(k); ok {
				take(id, rowOf(c))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, row := range r.batch {
		take(id, row)
	}
	return nil
}

// rowOf is a stored row's counters as a Row.
func rowOf(c map[string]int64) *Row {
	return &Row{Requests: c[cRequests], InputTokens: c[cInput], CachedInputTokens: c[cCached],
		OutputTokens: c[cOutput], ReasoningTokens: c[cReasoning], CostMicros: c[cCost]}
}

func (r *Recorder) query(ctx context.Context, hourly bool, from, to string, groupBy map[string]bool) ([]Row, error) {
	bucket := historyBucket
	if hourly {
		bucket = hourlyBucket
	}
	r.flushMu.RLock()
	defer r.flushMu.RUnlock()
	return r.sum(ctx, bucket, hourly, from, to, groupBy)
}

// groupOf is the group a stored row is summed in: its day (or hour), and what groupBy keeps
// of its team, key and model (a key keeps its team: key names are a team's own).
func groupOf(id rowID, groupBy map[string]bool) rowID {
	g := rowID{day: id.day}
	if groupBy["team"] || groupBy["key"] {
		g.team = id.team
	}
	if groupBy["key"] {
		g.key = id.key
	}
	if groupBy["model"] {
		g.model = id.model
	}
	return g
}

// addInto adds row to sums[k], the sum of its group, which starts as first.
func addInto[K comparable](sums map[K]*Row, k K, first Row, row *Row) {
	s := sums[k]
	if s == nil {
		s = &first
		sums[k] = s
	}
	s.add(row)
}

// isoDay writes a stored day, YYYYMMDD (and the hour after it, if any), as YYYY-MM-DD.
func isoDay(day string) string { return day[:4] + "-" + day[4:6] + "-" + day[6:8] }

// sum is query with r.flushMu held.
func (r *Recorder) sum(ctx context.Context, bucket string, hourly bool, from, to string, groupBy map[string]bool) ([]Row, error) {
	sums := map[rowID]*Row{}
	take := func(id rowID, row *Row) {
		if id.kind != plainRow || id.hourly() != hourly || id.day[:8] < from || id.day[:8] > to {
			return
		}
		addInto(sums, groupOf(id, groupBy), Row{}, row)
	}
	if err := r.eachRow(ctx, bucket, commonPrefix(from, to), parseRowKey, take); err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(sums))
	for id, s := range sums {
		s.Day = isoDay(id.day)
		if hourly {
			s.Hour = s.Day + "T" + id.day[8:] + ":00:00Z"
		}
		s.Team, s.Key, s.Model = id.team, id.key, id.model
		rows = append(rows, *s)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Day != b.Day || a.Hour != b.Hour {
			return a.Day+a.Hour < b.Day+b.Hour
		}
		if a.Team != b.Team {
			return a.Team < b.Team
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Model < b.Model
	})
	return rows, nil
}

func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

package billing

import (
	"context"
	"sort"
	"strings"
)

// Attribution (issue 28): besides its team/key/model row, a request that names an end user
// or carries tags adds to one daily row per end user and per tag, each per team and model,
// in a bucket of its own. Rows are keyed
//
//	"u/20261126/<team>/<end user>/<model>"           an end user's
//	"t/20261126/<team>/<tag key>/<value>/<model>"    a tag's
//
// with '%' and '/' escaped in the tag key, value and end user (they are the client's
// choice; a model, last, may hold '/'), and the value "%" (which no escaped value can be)
// for the values past the cap. The kind comes first so that a query by tag scans no end
// user's row, and one by end user no tag's: a store scans by key prefix (Redis key by key).
const attrBucket = "usage_attr_days"

// DefaultDistinctValues is how many distinct end users, and distinct values of each tag
// key, a team's day records by name unless SetDistinctValues says: the rest are summed in
// one OtherValues row. Tag keys are allow-listed and values bounded in length, but a client
// can still send a fresh end user or tag value with every request; without a cap each would
// be a row of its own in the store.
const DefaultDistinctValues = 1000

// NoValue and OtherValues are the Value of an attribution query's rows for the requests that
// named no end user (or had no value for the tag key), and for those whose value came past
// the day's cap.
const (
	NoValue     = "(none)"
	OtherValues = "(other)"
)

// Tag is one request tag as the history records it: the shape of reqlog.Tag, which this
// package does not import.
type Tag struct{ Key, Value string }

// rowKind tells a usage row (per key) from the attribution rows.
type rowKind uint8

const (
	plainRow rowKind = iota
	tagRow
	userRow
)

// SetDistinctValues sets the cap of distinct end users, and of distinct values of each tag
// key, recorded per team and UTC day (n < 1: DefaultDistinctValues). Call it before the
// first Record.
func (r *Recorder) SetDistinctValues(n int) {
	if n < 1 {
		n = DefaultDistinctValues
	}
	r.maxDistinct = n
}

// distinctValues remembers which values each team's dimension recorded today, so that the
// cap counts distinct values rather than requests. It is per replica, filled at the day's
// first flush with the values the store already names (loadDistinct): a team's day holds at
// most maxDistinct named values per dimension per replica, a bound no client can raise.
type distinctValues struct {
	day  string
	seen map[dimension]map[string]struct{}
}

// dimension is one team's end users (key "", kind userRow) or one of its tag keys.
type dimension struct {
	team, key string
	kind      rowKind
}

// admit reports whether value is recorded by name in dim today: it already was, or the
// dimension has room for one more.
func (d *distinctValues) admit(day string, dim dimension, value string, most int) bool {
	if d.day != day {
		d.day, d.seen = day, map[dimension]map[string]struct{}{}
	}
	set := d.seen[dim]
	if set == nil {
		set = map[string]struct{}{}
		d.seen[dim] = set
	}
	if _, ok := set[value]; ok {
		return true
	}
	if len(set) >= most {
		return false
	}
	set[value] = struct{}{}
	return true
}

// loadDistinct adds to today's distinct values those the store already names, once a day at
// the first flush: after a restart the cap goes on counting the values named before it, and
// values another replica named by then stay named here. It reads the store with r.flushMu
// held and r.mu not, so requests are not held up; a failed read is tried at the next flush.
func (r *Recorder) loadDistinct(ctx context.Context) {
	day, _ := func() (string, string) { r.mu.Lock(); defer r.mu.Unlock(); return r.days.at(r.now()) }()
	day = day[1:]
	if r.loadedDay == day {
		return
	}
	type named struct {
		dim   dimension
		value string
	}
	var found []named
	for _, kind := range []rowKind{userRow, tagRow} {
		err := r.st.ScanCounters(ctx, attrBucket, kindPrefix(kind)+day+"/", func(k string, _ map[string]int64) error {
			if id, ok := parseAttrKey(k); ok && !id.other {
				found = append(found, named{dimension{team: id.team, key: id.key, kind: id.kind}, id.value})
			}
			return nil
		})
		if err != nil {
			return
		}
	}
	r.mu.Lock()
	if r.distinct.day == "" || r.distinct.day == day { // not if requests moved on to the next day meanwhile
		for _, n := range found {
			r.distinct.admit(day, n.dim, n.value, r.maxDistinct)
		}
	}
	r.mu.Unlock()
	r.loadedDay = day
}

// attribute adds one request to its end user's row and its tags' rows; r.mu is held. Empty
// values are not recorded: the request shows under NoValue.
func (r *Recorder) attribute(day, team, model, endUser string, tags []Tag, u Usage, costMicros int64) {
	slots := r.slotsOf(day, team, model)
	if endUser != "" {
		r.addAttributed(slots, day, team, model, "", endUser, u, costMicros)
	}
	for i, t := range tags {
		if t.Value == "" || t.Key == "" || repeatedKey(tags[:i], t.Key) {
			continue // one row per tag key, whatever a caller sent twice; "" is no tag key
		}
		r.addAttributed(slots, day, team, model, t.Key, t.Value, u, costMicros)
	}
}

func (r *Recorder) attrID(day, team, model string, dim dimension, value string) rowID {
	id := rowID{day: day, team: team, key: dim.key, model: model, kind: dim.kind}
	if r.distinct.admit(day, dim, value, r.maxDistinct) {
		id.value = value
	} else {
		id.other = true
	}
	return id
}

func repeatedKey(tags []Tag, key string) bool {
	for _, t := range tags {
		if t.Key == key {
			return true
		}
	}
	return false
}

// kindPrefix starts the store keys of a kind of attribution row.
func kindPrefix(kind rowKind) string {
	if kind == tagRow {
		return "t/"
	}
	return "u/"
}

func (id rowID) attrStoreKey() string {
	value := "%"
	if !id.other {
		value = escapeSegment(id.value)
	}
	if id.kind == tagRow {
		return "t/" + id.day + "/" + id.team + "/" + escapeSegment(id.key) + "/" + value + "/" + id.model
	}
	return "u/" + id.day + "/" + id.team + "/" + value + "/" + id.model
}

func parseAttrKey(k string) (rowID, bool) {
	var parts []string
	var id rowID
	switch {
	case strings.HasPrefix(k, "u/"):
		if parts = strings.SplitN(k[2:], "/", 4); len(parts) != 4 {
			return rowID{}, false
		}
		id.kind = userRow
	case strings.HasPrefix(k, "t/"):
		if parts = strings.SplitN(k[2:], "/", 5); len(parts) != 5 {
			return rowID{}, false
		}
		id.kind, id.key = tagRow, unescapeSegment(parts[2])
		parts = append(parts[:2], parts[3:]...)
	default:
		return rowID{}, false
	}
	if len(parts[0]) != 8 {
		return rowID{}, false
	}
	id.day, id.team, id.model = parts[0], parts[1], parts[3]
	if parts[2] == "%" {
		id.other = true
	} else {
		id.value = unescapeSegment(parts[2])
	}
	return id, true
}

var segmentEscaper = strings.NewReplacer("%", "%25", "/", "%2F")
var segmentUnescaper = strings.NewReplacer("%25", "%", "%2F", "/")

func escapeSegment(s string) string {
	if !strings.ContainsAny(s, "%/") {
		return s
	}
	return segmentEscaper.Replace(s)
}

func unescapeSegment(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	return segmentUnescaper.Replace(s)
}

// Dimension names what an attribution query splits by: the values of one tag key, or
// (TagKey "") the end users.
type Dimension struct{ TagKey string }

// QueryAttribution returns the daily rows of the days from..to (YYYYMMDD, inclusive) split
// by dim's values (Row.Value), summed over what groupBy leaves out: groupBy holds any of
// "team", "model" (the attribution rows have no key). The requests without a value show
// under NoValue: what the day's usage rows hold beyond the attributed ones, so each day's
// rows add up to the same totals as Query's. Rows not yet flushed are included. Rows come
// sorted by day, team, model and value, NoValue and OtherValues after the named values.
func (r *Recorder) QueryAttribution(ctx context.Context, from, to string, dim Dimension, groupBy map[string]bool) ([]Row, error) {
	kind, key := userRow, ""
	if dim.TagKey != "" {
		kind, key = tagRow, dim.TagKey
	}
	group := map[string]bool{"team": groupBy["team"], "model": groupBy["model"]}
	r.flushMu.RLock()
	defer r.flushMu.RUnlock()
	totals, err := r.sum(ctx, historyBucket, false, from, to, group)
	if err != nil {
		return nil, err
	}
	type cell struct{ day, team, model, value string }
	sums := map[cell]*Row{}
	take := func(id rowID, row *Row) {
		if id.kind != kind || id.key != key || id.day < from || id.day > to {
			return
		}
		g := groupOf(id, group)
		c := cell{day: isoDay(id.day), team: g.team, model: g.model, value: id.value}
		if id.other {
			c.value = OtherValues
		}
		addInto(sums, c, Row{Day: c.day, Team: c.team, Model: c.model, Value: c.value}, row)
	}
	if err := r.eachRow(ctx, attrBucket, kindPrefix(kind)+commonPrefix(from, to), parseAttrKey, take); err != nil {
		return nil, err
	}

	// What each total holds beyond its attributed rows is the requests without a value.
	attributed := map[cell]*Row{}
	rows := make([]Row, 0, len(sums)+len(totals))
	for c, s := range sums {
		rows = append(rows, *s)
		c.value = ""
		if a := attributed[c]; a != nil {
			a.add(s)
		} else {
			cp := *s
			attributed[c] = &cp
		}
	}
	for _, t := range totals {
		none := t
		none.Value = NoValue
		if a := attributed[cell{day: t.Day, team: t.Team, model: t.Model}]; a != nil {
			none.subtract(a)
		}
		if none.Requests > 0 {
			rows = append(rows, none)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch {
		case a.Day != b.Day:
			return a.Day < b.Day
		case a.Team != b.Team:
			return a.Team < b.Team
		case a.Model != b.Model:
			return a.Model < b.Model
		}
		return valueOrder(a.Value) < valueOrder(b.Value) || valueOrder(a.Value) == valueOrder(b.Value) && a.Value < b.Value
	})
	return rows, nil
}

// valueOrder puts named values first, then NoValue, then OtherValues. A client's own value
// spelled like either sorts with them; the docs say so.
func valueOrder(v string) int {
	switch v {
	case NoValue:
		return 1
	case OtherValues:
		return 2
	}
	return 0
}

// subtract takes o from r, no counter below zero: a usage row dropped after repeated write
// failures (maxRowFlushes) may leave the attributed rows larger than the total.
func (r *Row) subtract(o *Row) {
	r.Requests = max(r.Requests-o.Requests, 0)
	r.InputTokens = max(r.InputTokens-o.InputTokens, 0)
	r.CachedInputTokens = max(r.CachedInputTokens-o.CachedInputTokens, 0)
	r.OutputTokens = max(r.OutputTokens-o.OutputTokens, 0)
	r.ReasoningTokens = max(r.ReasoningTokens-o.ReasoningTokens, 0)
	r.CostMicros = max(r.CostMicros-o.CostMicros, 0)
}

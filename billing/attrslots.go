package billing

// attrSlots finds today's named attribution rows by what a request holds: one map lookup
// for the request's team and model, then one per value, keyed by the tag key and value (an
// end user's by key "", which no tag key is). The first request of a value checks the
// distinct-value cap and builds the row's id; the later ones hash only the value's parts
// and allocate nothing. A slot's row is the batch's until a flush takes the batch (gen
// tells), then is looked up again by its id. Values past the cap get no slot, so the maps
// hold no more values than the cap lets through a day; they start afresh with each day.
type attrSlots struct {
	day   string
	pairs map[teamModel]map[Tag]*attrSlot
}

type teamModel struct{ team, model string }

type attrSlot struct {
	id  rowID
	row *Row // the row in the batch of generation gen
	gen uint64
}

// slotsOf is the named rows of team and model today; r.mu is held.
func (r *Recorder) slotsOf(day, team, model string) map[Tag]*attrSlot {
	if r.slots.day != day {
		r.slots = attrSlots{day: day, pairs: map[teamModel]map[Tag]*attrSlot{}}
	}
	tm := teamModel{team, model}
	slots := r.slots.pairs[tm]
	if slots == nil {
		slots = map[Tag]*attrSlot{}
		r.slots.pairs[tm] = slots
	}
	return slots
}

// addAttributed adds one request to the attribution row of day, team and model for the
// value v of tag key k, or of the end user v when k is ""; slots are the team and model's
// (slotsOf) and r.mu is held.
func (r *Recorder) addAttributed(slots map[Tag]*attrSlot, day, team, model, k, v string, u Usage, costMicros int64) {
	key := Tag{Key: k, Value: v}
	s := slots[key]
	if s == nil {
		dim := dimension{team: team, key: k, kind: tagRow}
		if k == "" {
			dim.kind = userRow
		}
		id := r.attrID(day, team, model, dim, v)
		if id.other {
			r.addTo(id, u, costMicros)
			return
		}
		s = &attrSlot{id: id}
		slots[key] = s
	}
	if s.row == nil || s.gen != r.batchGen {
		s.row, s.gen = r.batchRow(s.id), r.batchGen
	}
	s.row.count(u, costMicros)
}

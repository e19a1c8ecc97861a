package billing

// attrSlots finds today's named attribution rows by what a request holds, in one map
// lookup each: the first request of a value checks the distinct-value cap and builds the
// row's id; the later ones hash its parts once and allocate nothing. A slot's row is the
// batch's until a flush takes the batch (gen tells), then is looked up again by its id.
// Values past the cap get no slot, so the map holds no more values than the cap lets
// through a day; it starts afresh with each day.
type attrSlots struct {
	day   string
	named map[slotKey]*attrSlot
}

// slotKey is a named attribution row of the day: key is the tag key ("" for an end user's).
type slotKey struct {
	team, model, key, value string
	kind                    rowKind
}

type attrSlot struct {
	id  rowID
	row *Row // the row in the batch of generation gen
	gen uint64
}

// addAttributed adds one request to the attribution row k of day; r.mu is held.
func (r *Recorder) addAttributed(day string, k slotKey, u Usage, costMicros int64) {
	s := r.slots.named[k]
	if s == nil {
		id := r.attrID(day, k.team, k.model, dimension{team: k.team, key: k.key, kind: k.kind}, k.value)
		if id.other {
			r.addTo(id, u, costMicros)
			return
		}
		s = &attrSlot{id: id}
		r.slots.named[k] = s
	}
	if s.row == nil || s.gen != r.batchGen {
		s.row, s.gen = r.batchRow(s.id), r.batchGen
	}
	s.row.count(u, costMicros)
}

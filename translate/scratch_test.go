package translate

import (
	"bytes"
	"testing"
	"unsafe"
)

// Converters that take turns with one Scratch, event by event, give what converters with
// their own give: nothing of an event stays in the scratch for the next one to see.
func TestFeedWithSharedScratch(t *testing.T) {
	var shared Scratch
	type run struct {
		raw  []byte
		meta Meta
	}
	var runs []run
	eachRecordedStream(t, func(t *testing.T, base string, raw []byte, meta Meta) {
		runs = append(runs, run{raw, meta})
	})
	for i := 0; i+1 < len(runs); i += 2 {
		a, b := runs[i], runs[i+1]
		evA, evB := splitEvents(a.raw), splitEvents(b.raw)
		ownA, ownB := NewStreamConverter(a.meta), NewStreamConverter(b.meta)
		lentA, lentB := NewStreamConverter(a.meta), NewStreamConverter(b.meta)
		for j := range max(len(evA), len(evB)) {
			for _, side := range []struct {
				evs       [][2]string
				own, lent *StreamConverter
			}{{evA, ownA, lentA}, {evB, ownB, lentB}} {
				if j >= len(side.evs) {
					continue
				}
				ev := side.evs[j]
				want, wantDone := side.own.Feed(ev[0], []byte(ev[1]))
				got, done := side.lent.FeedWith(&shared, nil, ev[0], []byte(ev[1]))
				if !bytes.Equal(got, want) || done != wantDone {
					t.Fatalf("event %d %s: FeedWith gave %q, %v; Feed gave %q, %v", j, ev[0], got, done, want, wantDone)
				}
			}
		}
	}
}

// A converter holds no event fields between events: that kilobyte is lent per call, and a
// thousand open streams would otherwise each keep one.
func TestConverterHoldsNoEventFields(t *testing.T) {
	if size := unsafe.Sizeof(StreamConverter{}); size >= unsafe.Sizeof(eventFields{}) {
		t.Errorf("StreamConverter is %d bytes, as large as the event fields (%d) it should not hold", size, unsafe.Sizeof(eventFields{}))
	}
	c := NewStreamConverter(Meta{ID: "x", Model: "m"})
	var s Scratch
	c.FeedWith(&s, nil, "", []byte(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"hi"}`))
	if c.ev != nil || s.ev.nStored != 0 || s.ev.delta.Raw != "" {
		t.Error("the scratch still holds the last event's fields after FeedWith returned")
	}
}

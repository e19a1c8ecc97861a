package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/store"
	"modelgate/testclock"
)

// flakyStore refuses the attribution rows' writes while failing is set.
type flakyStore struct {
	store.Store
	failing atomic.Bool
}

func (s *flakyStore) Add(ctx context.Context, bucket, key string, c map[string]int64, ttl time.Duration) error {
	if bucket == attrBucket && s.failing.Load() {
		return errors.New("store down")
	}
	return s.Store.Add(ctx, bucket, key, c, ttl)
}

// A value's row is found again after each flush took the batch it was in, after a flush
// that failed and kept it, and on the next day: every request is counted once, in the
// store, under its day.
func TestAttributionRowsAcrossFlushes(t *testing.T) {
	ctx := context.Background()
	c := testclock.At(time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC))
	st := &flakyStore{Store: openBolt(t, &clock{c.Now()})}
	r := NewRecorder(st, 48*time.Hour, c.Now, nil)
	r.SetDistinctValues(1)
	u1 := call{team: "a", model: "m", user: "u1", tags: feature("f1"), cost: 1}
	u2 := call{team: "a", model: "m", user: "u2", tags: feature("f2"), cost: 1} // past the cap of 1: other
	flush := func(wantErr bool) {
		t.Helper()
		if err := r.Flush(ctx); (err != nil) != wantErr {
			t.Fatalf("flush: %v, want an error: %v", err, wantErr)
		}
	}
	u1.record(r)
	flush(false)
	u1.record(r)
	u2.record(r)
	u1.record(r)
	flush(false)
	st.failing.Store(true)
	u1.record(r)
	u2.record(r)
	flush(true)  // kept for the next flush
	u1.record(r) // joins the kept row
	st.failing.Store(false)
	flush(false)
	c.Set(testclock.NextMidnight(c.Now()))
	u2.record(r) // a new day: u2 and f2 are the day's first, named
	u1.record(r) // and u1, f1 the day's second: other
	flush(false)

	fresh := NewRecorder(st, 48*time.Hour, c.Now, nil) // reads only what the store holds
	for _, tc := range []struct {
		dim  Dimension
		day  string
		want []got
	}{
		{Dimension{}, "20261126", []got{{"a", "m", "u1", 5, 5}, {"a", "m", OtherValues, 2, 2}}},
		{Dimension{TagKey: "feature"}, "20261126", []got{{"a", "m", "f1", 5, 5}, {"a", "m", OtherValues, 2, 2}}},
		{Dimension{}, "20261127", []got{{"a", "m", "u2", 1, 1}, {"a", "m", OtherValues, 1, 1}}},
		{Dimension{TagKey: "feature"}, "20261127", []got{{"a", "m", "f2", 1, 1}, {"a", "m", OtherValues, 1, 1}}},
	} {
		rows, err := fresh.QueryAttribution(ctx, tc.day, tc.day, tc.dim, map[string]bool{"team": true, "model": true})
		if err != nil {
			t.Fatal(err)
		}
		if g := reduce(rows); fmt.Sprint(g) != fmt.Sprint(tc.want) {
			t.Errorf("%+v %s:\n got %v\nwant %v", tc.dim, tc.day, g, tc.want)
		}
	}
}

// Values past the cap take no slot: however many a client sends, the recorder keeps no
// more of them than the cap names.
func TestAttributionSlotsBounded(t *testing.T) {
	r := NewRecorder(nil, time.Hour, nil, nil)
	r.SetDistinctValues(3)
	for i := range 100 {
		call{team: "a", model: "m", user: fmt.Sprint("u", i), tags: feature(fmt.Sprint("f", i)), cost: 1}.record(r)
	}
	n := 0
	for _, slots := range r.slots.pairs {
		n += len(slots)
	}
	if n != 6 { // three end users, three features
		t.Fatalf("%d slots, want 6", n)
	}
	rows, _ := r.QueryAttribution(context.Background(), "00000000", "99999999", Dimension{}, nil)
	var names []string
	for _, row := range rows {
		names = append(names, fmt.Sprint(row.Value, ":", row.Requests))
	}
	if got := strings.Join(names, " "); got != "u0:1 u1:1 u2:1 (other):97" {
		t.Fatalf("rows %s", got)
	}
}

// BenchmarkRecorderAttribute is what an end user and three tags add to a request's history
// record: the attribution rows alone, the values named already (the steady state).
//
//	go test ./billing -run '^$' -bench RecorderAttribute -count 6
func BenchmarkRecorderAttribute(b *testing.B) {
	u := Usage{InputTokens: 1200, CachedInputTokens: 200, OutputTokens: 350}
	tags := []Tag{{"customer", "acme"}, {"experiment", "b"}, {"feature", "search"}}
	r := NewRecorder(nil, time.Hour, nil, nil)
	day, _ := r.days.at(r.now())
	day = day[1:]
	b.ReportAllocs()
	for b.Loop() {
		r.mu.Lock()
		r.attribute(day, "team", "model", "end-user-4711", tags, u, 1234)
		r.mu.Unlock()
	}
}

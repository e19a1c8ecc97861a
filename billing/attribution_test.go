package billing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/testclock"
)

// call is one request as the attribution tests record it.
type call struct {
	team, model, user string
	tags              []Tag
	cost              int64
}

func (c call) record(r *Recorder) {
	r.RecordAttributed(c.team, "k", c.model, Usage{InputTokens: 10, OutputTokens: 1}, c.cost, c.user, c.tags)
}

// got is a query row reduced to what the tables compare.
type got struct {
	team, model, value string
	requests, cost     int64
}

func reduce(rows []Row) []got {
	out := make([]got, len(rows))
	for i, r := range rows {
		out[i] = got{r.Team, r.Model, r.Value, r.Requests, r.CostMicros}
	}
	return out
}

func feature(v string) []Tag { return []Tag{{"feature", v}} }

// Attribution splits a day's usage by one tag key or by end user, per team and model as
// asked; the requests without a value show under NoValue, and the rows add up to the day.
func TestQueryAttribution(t *testing.T) {
	calls := []call{
		{team: "search", model: "m1", user: "u1", tags: []Tag{{"feature", "search"}, {"customer", "acme"}}, cost: 10},
		{team: "search", model: "m1", user: "u1", tags: feature("search"), cost: 20},
		{team: "search", model: "m2", user: "u2", tags: feature("chat"), cost: 5},
		{team: "search", model: "m2", cost: 7},                                               // no user, no tags
		{team: "ops", model: "m1", user: "u1", tags: feature("search"), cost: 100},           // same user, another team
		{team: "ops", model: "m1", tags: []Tag{{"feature", "x"}, {"feature", "y"}}, cost: 1}, // a key twice: the first counts
	}
	for _, tc := range []struct {
		name    string
		dim     Dimension
		groupBy map[string]bool
		want    []got
	}{
		{"feature_alone", Dimension{TagKey: "feature"}, nil, []got{
			{"", "", "chat", 1, 5}, {"", "", "search", 3, 130}, {"", "", "x", 1, 1}, {"", "", NoValue, 1, 7}}},
		{"feature_by_team", Dimension{TagKey: "feature"}, map[string]bool{"team": true}, []got{
			{"ops", "", "search", 1, 100}, {"ops", "", "x", 1, 1},
			{"search", "", "chat", 1, 5}, {"search", "", "search", 2, 30}, {"search", "", NoValue, 1, 7}}},
		{"feature_by_team_model", Dimension{TagKey: "feature"}, map[string]bool{"team": true, "model": true}, []got{
			{"ops", "m1", "search", 1, 100}, {"ops", "m1", "x", 1, 1},
			{"search", "m1", "search", 2, 30},
			{"search", "m2", "chat", 1, 5}, {"search", "m2", NoValue, 1, 7}}},
		{"customer", Dimension{TagKey: "customer"}, nil, []got{{"", "", "acme", 1, 10}, {"", "", NoValue, 5, 133}}},
		{"unknown_key_all_none", Dimension{TagKey: "experiment"}, nil, []got{{"", "", NoValue, 6, 143}}},
		{"users", Dimension{}, nil, []got{{"", "", "u1", 3, 130}, {"", "", "u2", 1, 5}, {"", "", NoValue, 2, 8}}},
		{"users_by_team", Dimension{}, map[string]bool{"team": true, "key": true}, []got{
			{"ops", "", "u1", 1, 100}, {"ops", "", NoValue, 1, 1},
			{"search", "", "u1", 2, 30}, {"search", "", "u2", 1, 5}, {"search", "", NoValue, 1, 7}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testclock.At(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
			for _, withStore := range []bool{false, true} {
				var st store.Store
				if withStore {
					st = openBolt(t, &clock{c.Now()})
				}
				r := NewRecorder(st, time.Hour, c.Now, nil)
				for _, cl := range calls {
					cl.record(r)
				}
				if err := r.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				rows, err := r.QueryAttribution(context.Background(), "20261126", "20261126", tc.dim, tc.groupBy)
				if err != nil {
					t.Fatal(err)
				}
				if g := reduce(rows); fmt.Sprint(g) != fmt.Sprint(tc.want) {
					t.Errorf("store %v:\n got %v\nwant %v", withStore, g, tc.want)
				}
				for _, row := range rows {
					if row.Day != "2026-11-26" {
						t.Errorf("day %q", row.Day)
					}
				}
			}
		})
	}
}

// Past the cap, a team's new end users of the day share one OtherValues row; those already
// named stay named, other teams and tag keys have caps of their own, and a new day starts
// afresh.
func TestDistinctValueCap(t *testing.T) {
	c := testclock.At(time.Date(2026, 11, 26, 23, 59, 0, 0, time.UTC))
	st := openBolt(t, &clock{c.Now()})
	r := NewRecorder(st, 48*time.Hour, c.Now, nil)
	r.SetDistinctValues(2)
	for _, cl := range []call{
		{team: "a", model: "m", user: "u1", cost: 1},
		{team: "a", model: "m", user: "u2", tags: feature("f1"), cost: 1},
		{team: "a", model: "m", user: "u3", tags: feature("f2"), cost: 1}, // third user: other
		{team: "a", model: "m", user: "u4", tags: feature("f3"), cost: 1}, // fourth user, third feature: other
		{team: "a", model: "m", user: "u1", cost: 1},                      // named already
		{team: "b", model: "m", user: "u3", cost: 1},                      // another team's first
	} {
		cl.record(r)
	}
	c.Set(testclock.NextMidnight(c.Now()))
	call{team: "a", model: "m", user: "u4", cost: 1}.record(r) // a new day: named
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dim  Dimension
		from string
		want []got
	}{
		{Dimension{}, "20261126", []got{{"a", "", "u1", 2, 2}, {"a", "", "u2", 1, 1}, {"a", "", OtherValues, 2, 2}, {"b", "", "u3", 1, 1}}},
		{Dimension{TagKey: "feature"}, "20261126", []got{
			{"a", "", "f1", 1, 1}, {"a", "", "f2", 1, 1}, {"a", "", NoValue, 2, 2}, {"a", "", OtherValues, 1, 1}, {"b", "", NoValue, 1, 1}}},
		{Dimension{}, "20261127", []got{{"a", "", "u4", 1, 1}}},
	} {
		rows, err := r.QueryAttribution(context.Background(), tc.from, tc.from, tc.dim, map[string]bool{"team": true})
		if err != nil {
			t.Fatal(err)
		}
		if g := reduce(rows); fmt.Sprint(g) != fmt.Sprint(tc.want) {
			t.Errorf("%+v %s:\n got %v\nwant %v", tc.dim, tc.from, g, tc.want)
		}
	}
	// The day boundary splits the query by day.
	rows, _ := r.QueryAttribution(context.Background(), "20261126", "20261127", Dimension{}, nil)
	if len(rows) != 5 || rows[4].Day != "2026-11-27" || rows[4].Value != "u4" {
		t.Errorf("two days: %+v", rows)
	}
}

// The cap goes on counting across a restart: the values the store names today fill the new
// recorder's sets at its first flush, so a restart buys a team no fresh named values, and a
// value named before it stays named.
func TestDistinctValueCapSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	c := testclock.At(time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC))
	st := openBolt(t, &clock{c.Now()})
	r1 := NewRecorder(st, time.Hour, c.Now, nil)
	r1.SetDistinctValues(2)
	for _, u := range []string{"u1", "u2"} {
		call{team: "a", model: "m", user: u, cost: 1}.record(r1)
	}
	if err := r1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := NewRecorder(st, time.Hour, c.Now, nil)
	r2.SetDistinctValues(2)
	if err := r2.Flush(ctx); err != nil { // the first flush, as Run does each second
		t.Fatal(err)
	}
	for _, u := range []string{"u3", "u2"} {
		call{team: "a", model: "m", user: u, cost: 1}.record(r2)
	}
	if err := r2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := r2.QueryAttribution(ctx, "20261126", "20261126", Dimension{}, nil)
	want := []got{{"", "", "u1", 1, 1}, {"", "", "u2", 2, 2}, {"", "", OtherValues, 1, 1}}
	if err != nil || fmt.Sprint(reduce(rows)) != fmt.Sprint(want) {
		t.Fatalf("after restart: %v %v, want %v", reduce(rows), err, want)
	}
}

// Values are the client's choice: a '/' or '%' in one, or a value spelled like the reserved
// "other" segment, comes back as sent, and the old per-key rows are untouched.
func TestAttributionKeysRoundTrip(t *testing.T) {
	c := testclock.At(time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC))
	st := openBolt(t, &clock{c.Now()})
	r := NewRecorder(st, time.Hour, c.Now, nil)
	odd := []string{"a/b", "%", "%2F", "50%/x", "u"}
	for _, v := range odd {
		call{team: "t", model: "org/model", user: v, tags: []Tag{{"fe/at%", v}}, cost: 1}.record(r)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, dim := range []Dimension{{}, {TagKey: "fe/at%"}} {
		rows, err := r.QueryAttribution(context.Background(), "20261126", "20261126", dim, map[string]bool{"model": true})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(odd) {
			t.Fatalf("%+v: %+v", dim, rows)
		}
		seen := map[string]bool{}
		for _, row := range rows {
			seen[row.Value] = row.Model == "org/model" && row.Requests == 1
		}
		for _, v := range odd {
			if !seen[v] {
				t.Errorf("%+v: %q not back: %+v", dim, v, rows)
			}
		}
	}
	plain, err := r.Query(context.Background(), "20261126", "20261126", map[string]bool{"team": true, "key": true, "model": true})
	if err != nil || len(plain) != 1 || plain[0].Requests != int64(len(odd)) || plain[0].Value != "" {
		t.Fatalf("plain rows %+v %v", plain, err)
	}
}

// Flushed rows survive a restart (a new recorder on the same bbolt file), and two replicas
// on one Redis add up.
func TestAttributionSharedAndDurable(t *testing.T) {
	ctx := context.Background()
	c := testclock.At(time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC))
	t.Run("bolt_restart", func(t *testing.T) {
		dir := t.TempDir()
		st, err := store.OpenBolt(dir, store.BoltOptions{Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		r := NewRecorder(st, time.Hour, c.Now, nil)
		call{team: "t", model: "m", user: "u1", tags: feature("search"), cost: 3}.record(r)
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		st.Close()
		st2, err := store.OpenBolt(dir, store.BoltOptions{Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer st2.Close()
		rows, err := NewRecorder(st2, time.Hour, c.Now, nil).QueryAttribution(ctx, "20261126", "20261126", Dimension{TagKey: "feature"}, nil)
		if err != nil || fmt.Sprint(reduce(rows)) != fmt.Sprint([]got{{"", "", "search", 1, 3}}) {
			t.Fatalf("after restart: %+v %v", rows, err)
		}
	})
	t.Run("redis_two_replicas", func(t *testing.T) {
		srv := redistest.Start(t)
		open := func() store.Store {
			st := store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr}))
			t.Cleanup(func() { st.Close() })
			return st
		}
		r1, r2 := NewRecorder(open(), time.Hour, c.Now, nil), NewRecorder(open(), time.Hour, c.Now, nil)
		for i := range 3 {
			call{team: "t", model: "m", user: "u1", tags: feature("search"), cost: 2}.record(r1)
			call{team: "t", model: "m", user: fmt.Sprint("v", i), tags: feature("search"), cost: 5}.record(r2)
		}
		call{team: "t", model: "m", cost: 1}.record(r2)
		if err := r1.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range []*Recorder{r1, r2} {
			rows, err := r.QueryAttribution(ctx, "20261126", "20261126", Dimension{TagKey: "feature"}, nil)
			if err != nil || fmt.Sprint(reduce(rows)) != fmt.Sprint([]got{{"", "", "search", 6, 21}, {"", "", NoValue, 1, 1}}) {
				t.Fatalf("feature: %+v %v", rows, err)
			}
			rows, err = r.QueryAttribution(ctx, "20261126", "20261126", Dimension{}, nil)
			if err != nil || len(rows) != 5 || rows[0].Value != "u1" || rows[0].Requests != 3 || rows[4].Value != NoValue {
				t.Fatalf("users: %+v %v", rows, err)
			}
		}
	})
}

// BenchmarkRecord compares a request's history record with and without an end user and two
// tags: what attribution adds to the request path.
//
//	go test ./billing -run '^$' -bench 'Record/' -count 6
func BenchmarkRecord(b *testing.B) {
	u := Usage{InputTokens: 1200, CachedInputTokens: 200, OutputTokens: 350}
	tags := []Tag{{"feature", "search"}, {"customer", "acme"}}
	for _, tc := range []struct {
		name string
		user string
		tags []Tag
	}{{"plain", "", nil}, {"tags_and_user", "user-42", tags}} {
		b.Run(tc.name, func(b *testing.B) {
			r := NewRecorder(nil, time.Hour, nil, nil)
			b.ReportAllocs()
			for b.Loop() {
				r.RecordAttributed("team", "key", "m", u, 1234, tc.user, tc.tags)
			}
		})
	}
}

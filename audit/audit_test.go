package audit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/store/storetest"
	"modelgate/testclock"
)

// boltLog is a log on a fresh bbolt store (no clock: ids alone order it), closed with the test.
func boltLog(t *testing.T) (*Log, *store.Bolt) {
	t.Helper()
	st := storetest.OpenBolt(t, t.TempDir(), nil)
	t.Cleanup(func() { st.Close() })
	return New(st, nil), st
}

func record(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.Record(context.Background(), Entry{Actor: "admin:0a1b2c3d", Action: KeyIssued, Target: fmt.Sprintf("search/k%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// pages reads the whole log page by page and returns the targets in the order read and the
// number of pages.
func pages(t *testing.T, l *Log, limit int) (targets []string, n int) {
	t.Helper()
	before := ""
	for {
		entries, next, err := l.List(context.Background(), before, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > limit {
			t.Fatalf("page of %d entries, limit %d", len(entries), limit)
		}
		n++
		for _, e := range entries {
			targets = append(targets, e.Target)
		}
		if next == "" {
			return targets, n
		}
		if n > 1000 {
			t.Fatal("paging does not end")
		}
		before = next
	}
}

// wantTargets fails t unless the whole log, read in pages of limit entries, names the
// targets in want (space-separated, newest first); what says which log it was.
func wantTargets(t *testing.T, l *Log, limit int, want, what string) {
	t.Helper()
	if got, _ := pages(t, l, limit); strings.Join(got, " ") != want {
		t.Errorf("%s: %v, want %s", what, got, want)
	}
}

func TestNewestFirstPaged(t *testing.T) {
	for _, s := range storetest.Backends() {
		t.Run(s.Name, func(t *testing.T) {
			clock := testclock.New()
			l := New(s.Open(t, clock.Now), clock.Now)
			if entries, next, err := l.List(context.Background(), "", 10); err != nil || len(entries) != 0 || next != "" {
				t.Fatalf("empty log: %v %q %v", entries, next, err)
			}
			record(t, l, 7)
			for _, limit := range []int{1, 3, 7, 50} {
				wantTargets(t, l, limit, "search/k6 search/k5 search/k4 search/k3 search/k2 search/k1 search/k0", fmt.Sprintf("limit %d", limit))
			}
			entries, next, err := l.List(context.Background(), "", 2)
			if err != nil || len(entries) != 2 {
				t.Fatal(entries, err)
			}
			if entries[0].ID != "aud_0000000000000007" || entries[1].ID != "aud_0000000000000006" || next != entries[1].ID {
				t.Errorf("ids %s %s next %s", entries[0].ID, entries[1].ID, next)
			}
			if !entries[0].Time.Equal(clock.Now().UTC()) || entries[0].Actor != "admin:0a1b2c3d" || entries[0].Action != KeyIssued {
				t.Errorf("entry %+v", entries[0])
			}
			if _, _, err := l.List(context.Background(), "aud_x", 2); err == nil {
				t.Error("a bad cursor was accepted")
			}
		})
	}
}

// TestSurvivesRestart reopens the bbolt file: the entries and the sequence are still there.
func TestSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clock := testclock.New()
	st := storetest.OpenBolt(t, dir, clock.Now)
	record(t, New(st, clock.Now), 2)
	st.Close()

	st = storetest.OpenBolt(t, dir, clock.Now)
	defer st.Close()
	l := New(st, clock.Now)
	record(t, l, 1)
	entries, _, err := l.List(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[0].ID != "aud_0000000000000003" || entries[2].Target != "search/k0" {
		t.Fatalf("after a restart: %+v", entries)
	}
}

// TestTwoReplicasOneLog has two replicas on one Redis record at once: one log, every id
// once, both read the same pages.
func TestTwoReplicasOneLog(t *testing.T) {
	addr := redistest.Start(t).Addr
	replica := func() *Log {
		st := store.NewRedis(redis.NewClient(&redis.Options{Addr: addr}))
		t.Cleanup(func() { st.Close() })
		return New(st, nil)
	}
	a, b := replica(), replica()
	var wg sync.WaitGroup
	for i, l := range []*Log{a, b} {
		wg.Go(func() {
			for j := range 20 {
				if _, err := l.Record(context.Background(), Entry{Action: KeyIssued, Target: fmt.Sprintf("r%d/k%d", i, j)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	fromA, _ := pages(t, a, 7)
	fromB, _ := pages(t, b, 7)
	if len(fromA) != 40 || strings.Join(fromA, " ") != strings.Join(fromB, " ") {
		t.Fatalf("replica a read %d entries, b %d; equal: %v", len(fromA), len(fromB), strings.Join(fromA, " ") == strings.Join(fromB, " "))
	}
	seen := map[string]bool{}
	for _, target := range fromA {
		if seen[target] {
			t.Fatalf("%s listed twice", target)
		}
		seen[target] = true
	}
}

// TestRetention runs on bbolt, whose clock the test moves; Redis is sent the same TTL and
// expires by its own clock.
func TestRetention(t *testing.T) {
	clock := testclock.New()
	st := storetest.OpenBolt(t, t.TempDir(), clock.Now)
	defer st.Close()
	l := New(st, clock.Now)
	record(t, l, 2)
	clock.Advance(Retention - time.Hour)
	record(t, l, 1)
	clock.Advance(2 * time.Hour)
	wantTargets(t, l, 10, "search/k0", "after the retention of the first two")
}

// TestCountCap: past the cap, the oldest entries go, and a walk down stops at the cap.
func TestCountCap(t *testing.T) {
	for _, s := range storetest.Backends() {
		t.Run(s.Name, func(t *testing.T) {
			l := New(s.Open(t, nil), nil)
			l.maxEntries = 3
			record(t, l, 5)
			wantTargets(t, l, 2, "search/k4 search/k3 search/k2", "capped log")
		})
	}
}

// TestGapDoesNotEndTheLog: ids handed out for writes that then failed leave holes; the
// walk goes past them (up to maxGap in a row).
func TestGapDoesNotEndTheLog(t *testing.T) {
	l, st := boltLog(t)
	record(t, l, 1)
	if _, err := st.Incr(context.Background(), seqBucket, seqKey, seqName, maxGap-1, 0); err != nil {
		t.Fatal(err)
	}
	record(t, l, 1)
	wantTargets(t, l, 1, "search/k0 search/k0", "across a gap")
}

func TestBounds(t *testing.T) {
	l, _ := boltLog(t)
	long := strings.Repeat("é", 1000)
	details := map[string]string{}
	for i := range 20 {
		details[fmt.Sprintf("d%02d%s", i, long)] = long
	}
	changed := make([]string, MaxChanged+7)
	for i := range changed {
		changed[i] = long
	}
	e, err := l.Record(context.Background(), Entry{Actor: long, Action: long, Target: long + "\xff", Details: details, Changed: changed})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Actor) > maxActor || len(e.Action) > maxAction || len(e.Target) > maxTarget || len(e.Details) != maxDetails ||
		len(e.Changed) != MaxChanged || e.ChangedMore != 7 {
		t.Fatalf("unbounded entry: actor %d action %d target %d details %d changed %d more %d",
			len(e.Actor), len(e.Action), len(e.Target), len(e.Details), len(e.Changed), e.ChangedMore)
	}
	for k, v := range e.Details {
		if len(k) > maxDetailKey || len(v) > maxDetailValue || !strings.HasPrefix(k, "d0") {
			t.Fatalf("detail %q=%q", k, v)
		}
	}
	for _, s := range append([]string{e.Actor, e.Target}, e.Changed...) {
		if strings.Contains(s, "\xff") || !strings.HasPrefix(long, s) || len(s) > maxPath {
			t.Fatalf("cut badly: %q", s)
		}
	}
}

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"aud_0000000000000001", 1},
		{"aud_9223372036854775", 9223372036854775},
		{"aud_0000000000000000", 0},
		{"aud_000000000000001", 0},
		{"aud_+000000000000001", 0},
		{"AUD_0000000000000001", 0},
		{"", 0},
		{"aud_00000000000000x1", 0},
	} {
		got, err := ParseID(tc.in)
		if (err == nil) != (tc.want != 0) || got != tc.want {
			t.Errorf("ParseID(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add("aud_0000000000000042")
	f.Add("aud_-000000000000042")
	f.Add("aud_99999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseID(s)
		if err != nil {
			return
		}
		if n <= 0 || FormatID(n) != s {
			t.Fatalf("ParseID(%q) = %d, which formats as %q", s, n, FormatID(n))
		}
	})
}

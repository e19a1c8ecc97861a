package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/ratelimit"
	"modelgate/testclock"
)

func entry(rid string) *Entry {
	return &Entry{RequestID: rid, Route: "/v1/chat/completions", Team: "alpha", Key: "alpha-1", Model: "gpt-4o-mini",
		Stream: true, EndUser: "u1", Tags: "env:prod", InputReserved: 120, SpendScopes: []string{"key:alpha/alpha-1", "team:alpha"}, EndUserSpend: "enduser:alpha/u1",
		StartedMs: 1700000000000, Ticket: ratelimit.TicketState{ID: "t-" + rid, Lease: "l-" + rid, Tokens: 4216, Input: 120, Day: 20000,
			Charged: true, Counted: true, Scopes: []ratelimit.ScopeState{{ID: "key:alpha/alpha-1"}, {ID: "team:alpha", TokensPerMinute: 9000}}}}
}

// mustOpen opens the journal in dir, closed when the test ends.
func mustOpen(t testing.TB, dir string, o options) *Journal {
	t.Helper()
	j, err := open(dir, "0123456789abcdef", nil, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

func admit(t testing.TB, j *Journal, rid string) Handle {
	t.Helper()
	h, err := j.Admit(context.Background(), entry(rid))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ids is the request ids of left, sorted.
func ids(left []Left) []string {
	var out []string
	for _, l := range left {
		out = append(out, l.Entry.RequestID)
	}
	slices.Sort(out)
	return out
}

// onDisk is what a start on dir would find open.
func onDisk(t testing.TB, dir string) []string {
	t.Helper()
	left, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ids(left)
}

// TestLeftoverAfterKill: the entries a replica admitted and never cleared are what its next
// life on the same data path finds, whole, and only those: cleared ones are gone, another
// data path finds none, and Forget removes them for good.
func TestLeftoverAfterKill(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	before := mustOpen(t, dir, options{})
	var hs []Handle
	for i := range 3 {
		hs = append(hs, admit(t, before, fmt.Sprint("r", i)))
	}
	before.Clear(hs[1])
	before.Close() // writes the clear; the two open calls stay, as after a kill

	other := mustOpen(t, t.TempDir(), options{})
	if left, err := other.Leftover(ctx); err != nil || len(left) != 0 {
		t.Fatalf("another data path's leftover: %v, %v", left, err)
	}
	after := mustOpen(t, dir, options{})
	left, err := after.Leftover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(left); !slices.Equal(got, []string{"r0", "r2"}) {
		t.Fatalf("leftover %v, want r0 and r2", got)
	}
	if want := *entry("r2"); fmt.Sprint(left[1].Entry) != fmt.Sprint(want) {
		t.Errorf("read back %+v\nwant %+v", left[1].Entry, want)
	}
	// A new admission of this life does not reuse a leftover's id.
	h := admit(t, after, "r3")
	if h.id <= left[1].ID {
		t.Errorf("new entry id %d, leftover ids up to %d", h.id, left[1].ID)
	}
	if err := after.Forget(ctx, left); err != nil {
		t.Fatal(err)
	}
	if left, err := after.Leftover(ctx); err != nil || len(left) != 0 {
		t.Fatalf("after Forget: %v, %v", left, err)
	}
	if got := onDisk(t, dir); !slices.Equal(got, []string{"r3"}) {
		t.Fatalf("on disk after Forget: %v, want r3 alone", got)
	}
	after.Close()
	again := mustOpen(t, dir, options{})
	if left, _ := again.Leftover(ctx); !slices.Equal(ids(left), []string{"r3"}) {
		t.Fatalf("next start finds %v, want r3", ids(left))
	}
}

// TestAdmitRefusesAnEntryTooLargeToRead: an entry larger than a start reads back is refused
// with ErrEntryTooLarge and not written, so the entries admitted before and after it are
// still found whole: written, its record would have ended the segment's replay at itself.
func TestAdmitRefusesAnEntryTooLargeToRead(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, options{})
	admit(t, j, "before")
	big := entry("big")
	big.Tags = strings.Repeat("\x01", maxEntryBytes/6+1) // each byte escaped as \u0001
	if h, err := j.Admit(context.Background(), big); !errors.Is(err, ErrEntryTooLarge) || h.id != 0 {
		t.Fatalf("Admit of a %d-byte entry: handle %v, %v; want ErrEntryTooLarge", len(big.appendJSON(nil)), h, err)
	}
	admit(t, j, "after")
	j.Close()
	if got := onDisk(t, dir); !slices.Equal(got, []string{"after", "before"}) {
		t.Fatalf("a start finds %v, want after and before", got)
	}
}

// TestSecondProcessRefused: one data path's journal has one writer.
func TestSecondProcessRefused(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, dir, options{})
	if j, err := Open(dir, "fedcba9876543210", nil); err == nil {
		j.Close()
		t.Fatal("a second journal opened on the same data path")
	}
}

// counter counts appended records and can fail them.
type counter struct {
	writes atomic.Int64
	fail   atomic.Bool
}

func newCounter() *counter { return &counter{} }

// countedJournal opens a journal in dir on a test clock at noon, its writes counted (and
// failed on demand) by c.
func countedJournal(t *testing.T, dir string) (c *counter, clock *testclock.Clock, j *Journal) {
	t.Helper()
	c = newCounter()
	clock = testclock.At(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	return c, clock, mustOpen(t, dir, options{now: clock.Now, beforeWrite: c.beforeWrite})
}

func (c *counter) beforeWrite() error {
	c.writes.Add(1)
	if c.fail.Load() {
		return errors.New("disk full")
	}
	return nil
}

// TestConcurrentAdmissions: admissions from many goroutines at once each land whole, and are
// in the file as soon as Admit returns (a start reading the directory then, with the journal
// still open, as after a kill, finds every one), while the segment file keeps the size it
// was allocated with: an admission is a copy into the mapped segment, not a write that
// grows the file.
func TestConcurrentAdmissions(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, options{})
	names, _, _ := segments(dir)
	before, err := os.Stat(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	want := make([]string, 64)
	for i := range 64 {
		want[i] = fmt.Sprint("r", i)
		wg.Go(func() { admit(t, j, want[i]) })
	}
	wg.Wait()
	slices.Sort(want)
	if got := onDisk(t, dir); !slices.Equal(got, want) {
		t.Fatalf("on disk %v, want %v", got, want)
	}
	after, err := os.Stat(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || before.Size() != segmentBytes {
		t.Errorf("segment %d bytes before, %d after, want %d throughout", before.Size(), after.Size(), segmentBytes)
	}
}

// TestClearWritesNothingItself: a settled call's clear adds no write to its request, and is
// written only once clearDelay has passed (the stores' flushes of what the call was charged
// are then behind it), with the next batch; Close writes those left.
func TestClearWritesNothingItself(t *testing.T) {
	dir := t.TempDir()
	c, clock, j := countedJournal(t, dir)
	h0 := admit(t, j, "r0")
	n := c.writes.Load()
	j.Clear(h0)
	if got := c.writes.Load(); got != n {
		t.Fatalf("Clear wrote a batch (%d, was %d)", got, n)
	}
	clock.Advance(clearDelay - time.Millisecond)
	h1 := admit(t, j, "r1")
	if got := onDisk(t, dir); !slices.Equal(got, []string{"r0", "r1"}) {
		t.Fatalf("before clearDelay: %v, want r0 r1", got)
	}
	clock.Advance(time.Millisecond)
	admit(t, j, "r2")
	if got := onDisk(t, dir); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("after clearDelay: %v, want r1 r2", got)
	}
	j.Clear(h1)
	j.Close()
	if got := onDisk(t, dir); !slices.Equal(got, []string{"r2"}) {
		t.Fatalf("after Close: %v, want r2 (never cleared)", got)
	}
	if _, err := j.Admit(context.Background(), entry("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Admit after Close: %v, want ErrClosed", err)
	}
}

// TestWriteFailure: a failed write is reported, its handle still names the entry (a write
// whose outcome is unknown may have landed, and must be cleared), and the next batch starts
// a segment that a start reads whole: the failed batch's admission is in it, its clear
// taken.
func TestWriteFailure(t *testing.T) {
	dir := t.TempDir()
	c, clock, j := countedJournal(t, dir)
	h0 := admit(t, j, "r0")
	j.Clear(h0)
	clock.Advance(clearDelay)
	c.fail.Store(true)
	h1, err := j.Admit(context.Background(), entry("r1"))
	if err == nil || h1.id == 0 {
		t.Fatalf("Admit on a failing disk: %v, handle %v", err, h1)
	}
	// Half a record at the end of the segment, as a write cut short would leave.
	names, _, _ := segments(dir)
	f, err := os.OpenFile(filepath.Join(dir, names[len(names)-1]), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(appendAdmit(nil, 99, entry("torn"))[:20])
	f.Close()
	c.fail.Store(false)
	admit(t, j, "r2")
	if got := onDisk(t, dir); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("after the failure: %v, want r1 r2", got)
	}
	var nilJournal *Journal
	if h, err := nilJournal.Admit(context.Background(), entry("r0")); err != nil || h != (Handle{}) {
		t.Fatalf("nil journal: %v, %v", h, err)
	}
	nilJournal.Clear(h1)
}

// TestTornTail: a kill mid-write leaves part of the last record; the next start reads every
// whole record before it, says so in the log, and the journal goes on in a new segment that
// the start after reads whole.
func TestTornTail(t *testing.T) {
	for _, cut := range []int{1, recordHeader, recordHeader + 3, -1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := t.TempDir()
			first := mustOpen(t, dir, options{})
			admit(t, first, "r0")
			admit(t, first, "r1")
			first.Close()
			names, _, _ := segments(dir)
			rec := appendAdmit(nil, 7, entry("torn"))
			if cut < 0 {
				rec[len(rec)-1] ^= 0xff // whole, but its checksum fails
			} else {
				rec = rec[:cut]
			}
			f, err := os.OpenFile(filepath.Join(dir, names[0]), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(rec)
			f.Close()

			var log apitest.SyncBuffer
			j, err := open(dir, "0123456789abcdef", slog.New(slog.NewTextHandler(&log, nil)), options{})
			if err != nil {
				t.Fatal(err)
			}
			left, _ := j.Leftover(context.Background())
			if got := ids(left); !slices.Equal(got, []string{"r0", "r1"}) {
				t.Fatalf("leftover %v, want r0 r1", got)
			}
			if !strings.Contains(log.String(), "torn") {
				t.Errorf("the torn record was not logged: %s", log.String())
			}
			admit(t, j, "r2")
			j.Close()
			if got := onDisk(t, dir); !slices.Equal(got, []string{"r0", "r1", "r2"}) {
				t.Fatalf("next start finds %v, want r0 r1 r2", got)
			}
			if names, _, _ := segments(dir); len(names) != 1 {
				t.Errorf("segments %v, want one", names)
			}
		})
	}
}

// TestRotation: past its bound the segment is replaced by one holding only the open entries,
// so the journal's size follows the calls in flight, not the calls served; a start reads the
// same open set back.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	const bound = 8 << 10
	clock := testclock.At(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	j := mustOpen(t, dir, options{now: clock.Now, segmentBytes: bound})
	var open []string
	for i := range 500 {
		rid := fmt.Sprint("r", i)
		h := admit(t, j, rid)
		if i%50 == 0 {
			open = append(open, rid) // never cleared: in flight
			continue
		}
		j.Clear(h)
		clock.Advance(clearDelay)
	}
	admit(t, j, "last")
	open = append(open, "last")
	slices.Sort(open)
	names, nums, _ := segments(dir)
	if len(names) != 1 || nums[0] < 5 {
		t.Fatalf("segments %v: want one, after several rotations", names)
	}
	fi, err := os.Stat(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 2*bound {
		t.Errorf("segment holds %d bytes, bound %d", fi.Size(), bound)
	}
	if got := onDisk(t, dir); !slices.Equal(got, open) {
		t.Fatalf("on disk %v, want %v", got, open)
	}
	j.Close()
	again := mustOpen(t, dir, options{})
	if left, _ := again.Leftover(context.Background()); !slices.Equal(ids(left), open) {
		t.Fatalf("next start finds %v, want %v", ids(left), open)
	}
}

// TestKilledMidRotation: a kill after a rotation's rename and before the old segment's
// removal leaves both, and a temporary file of a rotation killed before its rename; a start
// reads the same open set and leaves one segment.
func TestKilledMidRotation(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, options{})
	admit(t, j, "r0")
	h := admit(t, j, "r1")
	j.Clear(h)
	j.Close()
	names, nums, _ := segments(dir)
	old, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	// The old segment (r0, r1, r1 cleared) and the new one (r0), and a half-written one.
	if err := os.WriteFile(filepath.Join(dir, segmentName(nums[0]+1)), appendAdmit(nil, 1, entry("r0")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, segmentName(nums[0]+2)+tempSuffix), old[:5], 0o600); err != nil {
		t.Fatal(err)
	}
	again := mustOpen(t, dir, options{})
	if left, _ := again.Leftover(context.Background()); !slices.Equal(ids(left), []string{"r0"}) {
		t.Fatalf("leftover %v, want r0", ids(left))
	}
	ents, _ := os.ReadDir(dir)
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	if segs, _, _ := segments(dir); len(segs) != 1 || slices.ContainsFunc(files, func(s string) bool { return strings.HasSuffix(s, tempSuffix) }) {
		t.Errorf("files after the start: %v", files)
	}
}

// TestRotationOfALargeOpenSet: an open set larger than the bound is not written again at
// every batch: a rotation waits for as many bytes again as it started the segment with. One
// past the rotation's write chunk (1 MiB) is carried whole, and read back whole.
func TestRotationOfALargeOpenSet(t *testing.T) {
	dir := t.TempDir()
	const bound = 4 << 10
	const n = 2600 // about 1.2 MB open, never cleared
	j := mustOpen(t, dir, options{segmentBytes: bound})
	for i := range n {
		admit(t, j, fmt.Sprint("r", i))
	}
	_, nums, _ := segments(dir)
	// Doubling from 4 KiB: about ten rotations, not one per admission.
	if got := nums[0]; got > 16 {
		t.Fatalf("%d segments started for %d admissions", got, n)
	}
	if got := onDisk(t, dir); len(got) != n {
		t.Fatalf("%d entries on disk, want %d", len(got), n)
	}
	j.Close()
	again := mustOpen(t, dir, options{segmentBytes: bound})
	if left, _ := again.Leftover(context.Background()); len(left) != n {
		t.Fatalf("next start finds %d, want %d", len(left), n)
	}
}

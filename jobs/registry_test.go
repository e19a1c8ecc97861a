package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/store"
	"modelgate/stored"
)

func TestAddCapsUnfinishedJobsPerOwner(t *testing.T) {
	reg := jobs.New(jobs.Options{})
	a1, ok1 := reg.Add("a", "resp_1", 2)
	_, ok2 := reg.Add("a", "resp_2", 2)
	_, ok3 := reg.Add("a", "resp_3", 2)
	_, okB := reg.Add("b", "resp_4", 2)
	_, okNoCap := reg.Add("a", "resp_5", 0)
	if !ok1 || !ok2 || ok3 || !okB || !okNoCap {
		t.Fatalf("adds: %v %v %v %v %v", ok1, ok2, ok3, okB, okNoCap)
	}
	if !reg.Running("a", "resp_1") || reg.Running("b", "resp_1") {
		t.Error("jobs are looked up by owner and id")
	}
	reg.Abandon(a1)
	if reg.Running("a", "resp_1") {
		t.Error("an abandoned job still runs")
	}
	if _, ok := reg.Add("a", "resp_6", 3); !ok {
		t.Error("no room after a job ended")
	}
}

// TestDrainRefusesNewJobs: once draining, nothing is added, whatever the cap.
func TestDrainRefusesNewJobs(t *testing.T) {
	reg := jobs.New(jobs.Options{})
	reg.Drain(context.Background())
	if _, ok := reg.Add("a", "resp_1", 0); ok {
		t.Error("a job was added after the drain")
	}
}

// TestCancel: a job of this instance is stopped and awaited, one of another replica marked
// cancelled in the store, and a finished one answered as it is.
func TestCancel(t *testing.T) {
	ctx := context.Background()
	t.Run("this_instance", func(t *testing.T) {
		reg, k, e, id := startBlocking(t, boltStore(t), jobs.Options{})
		r, err := reg.Cancel(ctx, k, owner, record(t, k, id))
		if err != nil || r.Status != stored.StatusCancelled || reg.Running(owner, id) {
			t.Fatalf("cancel: %+v %v", r, err)
		}
		if len(e.charges) != 1 {
			t.Errorf("settled %d times before the cancel answered", len(e.charges))
		}
	})
	t.Run("another_replica", func(t *testing.T) {
		st := shared{boltStore(t)}
		k := newKeeper(st)
		other := jobs.New(jobs.Options{Store: st})
		rec := &stored.Record{ID: "resp_x", Status: stored.StatusInProgress, Model: "m", Response: jobs.QueuedObject("resp_x", "m", "", 1)}
		if err := k.Keep(ctx, owner, rec); err != nil {
			t.Fatal(err)
		}
		r, err := other.Cancel(ctx, k, owner, rec)
		if err != nil || r.Status != stored.StatusCancelled || gjson.GetBytes(r.Response, "status").Str != stored.StatusCancelled {
			t.Fatalf("cancel: %+v %v", r, err)
		}
	})
	t.Run("finished", func(t *testing.T) {
		st := boltStore(t)
		k := newKeeper(st)
		reg := jobs.New(jobs.Options{Store: st})
		rec := &stored.Record{ID: "resp_y", Status: stored.StatusCompleted, Response: []byte(`{"status":"completed"}`)}
		if r, err := reg.Cancel(ctx, k, owner, rec); err != nil || r != rec {
			t.Errorf("cancel of a finished one: %+v %v", r, err)
		}
	})
	// The route read the record while the job ran; the job ended before the cancel looked
	// for it. Its settled end stands: a cancel must not rewrite it.
	t.Run("ended_meanwhile", func(t *testing.T) {
		for _, st := range []store.Store{boltStore(t), shared{boltStore(t)}} {
			k, e := newKeeper(st), newEnded()
			reg := jobs.New(jobs.Options{Store: st, Hooks: e.hooks()})
			ids, read := make(chan string, 1), make(chan *stored.Record, 1)
			id := submit(t, reg, k, e, callerFunc(func(_ context.Context, started func()) jobs.Outcome {
				started()
				r, _ := k.Get(context.Background(), owner, <-ids)
				read <- r // as the cancel route read it: in progress
				return jobs.Outcome{Status: stored.StatusCompleted, Output: []byte(`[{"type":"message"}]`),
					Charge: accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 2})}
			}))
			ids <- id
			stale := <-read
			if stale == nil {
				t.Fatal("the running job's record could not be read")
			}
			reg.Drain(context.Background())
			r, err := reg.Cancel(ctx, k, owner, stale)
			if err != nil || r.Status != stored.StatusCompleted || status(t, k, id) != stored.StatusCompleted {
				got := ""
				if r != nil {
					got = r.Status
				}
				t.Errorf("%T: cancel after the end answered %q %v; the record is %s", st, got, err, status(t, k, id))
			}
		}
	})
	t.Run("deleted_meanwhile", func(t *testing.T) {
		st := shared{boltStore(t)}
		k := newKeeper(st)
		reg := jobs.New(jobs.Options{Store: st})
		rec := &stored.Record{ID: "resp_z", Status: stored.StatusQueued, Response: jobs.QueuedObject("resp_z", "m", "", 1)}
		if _, err := reg.Cancel(ctx, k, owner, rec); !errors.Is(err, stored.ErrNotFound) {
			t.Errorf("cancel of a record that is gone: %v", err)
		}
	})
}

// TestHeartbeatStopsAJobCancelledElsewhere: a record marked cancelled through another
// replica stops its runner's platform call at the next heartbeat, and stays cancelled.
func TestHeartbeatStopsAJobCancelledElsewhere(t *testing.T) {
	st := shared{boltStore(t)}
	reg, k, _, id := startBlocking(t, st, jobs.Options{Lease: 30 * time.Millisecond})
	r := record(t, k, id)
	jobs.EndRecord(r, stored.StatusCancelled, jobs.ResponseError{}, 2000)
	if err := newKeeper(st).Update(context.Background(), owner, r); err != nil {
		t.Fatal(err)
	}
	// The drain waits for the job to stop on its own; one still running at its deadline
	// is failed by it instead.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg.Drain(ctx)
	if got := status(t, k, id); got != stored.StatusCancelled {
		t.Errorf("after the runner stopped: %s", got)
	}
}

// TestOrphans: with the embedded store every claim of another instance is a previous life
// of this process, reaped at start; with a shared store only a record whose claim is gone
// is failed when read, and one another replica holds is left to it.
func TestOrphans(t *testing.T) {
	ctx := context.Background()
	keep := func(t *testing.T, k *stored.Keeper, id, runner string) *stored.Record {
		t.Helper()
		rec := &stored.Record{ID: id, Status: stored.StatusInProgress, Model: "m", Response: jobs.QueuedObject(id, "m", "", 1)}
		if err := k.Keep(ctx, owner, rec); err != nil {
			t.Fatal(err)
		}
		if runner != "" {
			if err := k.Claim(ctx, owner, id, runner, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		return rec
	}
	t.Run("embedded_restart", func(t *testing.T) {
		st := boltStore(t)
		k := newKeeper(st)
		keep(t, k, "resp_prev", "mg_previous")
		jobs.New(jobs.Options{Store: st}).ReapOrphans(k)
		r := record(t, k, "resp_prev")
		if r.Status != stored.StatusFailed || !strings.Contains(gjson.GetBytes(r.Response, "error.message").Str, "restarted") {
			t.Errorf("after restart: %s", r.Response)
		}
		if runner, _ := k.Runner(ctx, owner, "resp_prev"); runner != "" {
			t.Errorf("still claimed by %q", runner)
		}
	})
	t.Run("shared_store", func(t *testing.T) {
		st := shared{boltStore(t)}
		k := newKeeper(st)
		reg := jobs.New(jobs.Options{Store: st})
		reg.ReapOrphans(k) // a shared store's claims are never reaped at start
		live, lost := keep(t, k, "resp_live", "mg_other"), keep(t, k, "resp_lost", "")
		if got := reg.CheckOrphan(ctx, k, owner, live); got.Status != stored.StatusInProgress {
			t.Errorf("another replica's job: %s", got.Status)
		}
		if got := reg.CheckOrphan(ctx, k, owner, lost); got.Status != stored.StatusFailed || status(t, k, "resp_lost") != stored.StatusFailed {
			t.Errorf("a job whose runner is gone: %s", got.Status)
		}
	})
}

// TestRecordEdits: the queued object a job starts as, and the edits that end a record.
func TestRecordEdits(t *testing.T) {
	q := gjson.ParseBytes(jobs.QueuedObject("resp_1", "m", "resp_0", 77))
	if q.Get("id").Str != "resp_1" || q.Get("object").Str != "response" || q.Get("status").Str != stored.StatusQueued ||
		!q.Get("background").Bool() || q.Get("previous_response_id").Str != "resp_0" || q.Get("created_at").Int() != 77 ||
		!q.Get("output").IsArray() || q.Get("error").Type != gjson.Null {
		t.Errorf("queued: %s", q.Raw)
	}
	if q := gjson.ParseBytes(jobs.QueuedObject("resp_1", "m", "", 77)); q.Get("previous_response_id").Type != gjson.Null {
		t.Errorf("a first turn names a previous response: %s", q.Raw)
	}
	for _, tc := range []struct {
		status      string
		err         jobs.ResponseError
		completedAt bool
	}{
		{stored.StatusCompleted, jobs.ResponseError{}, true},
		{stored.StatusFailed, jobs.ResponseError{Code: "server_error", Message: "m"}, false},
		{stored.StatusCancelled, jobs.ResponseError{}, false},
	} {
		r := &stored.Record{Status: stored.StatusInProgress, Response: jobs.QueuedObject("resp_1", "m", "", 77)}
		jobs.EndRecord(r, tc.status, tc.err, 99)
		obj := gjson.ParseBytes(r.Response)
		if r.Status != tc.status || obj.Get("status").Str != tc.status || obj.Get("error.code").Str != tc.err.Code ||
			obj.Get("error.message").Str != tc.err.Message || (obj.Get("completed_at").Int() == 99) != tc.completedAt {
			t.Errorf("%s: %s", tc.status, r.Response)
		}
	}
}

package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/store"
	"modelgate/stored"
)

const owner = "team:alpha"

var reserve = ratelimit.Usage{InputTokens: 10, OutputTokens: 100}

// callerFunc is a platform call written inline.
type callerFunc func(ctx context.Context, started func()) jobs.Outcome

func (f callerFunc) Call(ctx context.Context, started func()) jobs.Outcome { return f(ctx, started) }

// shared hides the embedded store's type: the registry treats it as one replicas share.
type shared struct{ store.Store }

func boltStore(t *testing.T) *store.Bolt {
	t.Helper()
	st, err := store.OpenBolt(t.TempDir(), store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newKeeper(st store.Store) *stored.Keeper {
	return stored.NewKeeper(st, stored.Options{TTL: time.Hour})
}

// ended is what a job's run reported: its settlement and its metrics summary.
type ended struct {
	mu       sync.Mutex
	charges  []accounting.Charge
	statuses []string // the record's status when each settlement happened
	reports  []reqlog.RequestSummary
	reported chan struct{}
}

func newEnded() *ended { return &ended{reported: make(chan struct{}, 8)} }

func (e *ended) hooks() reqlog.Hooks {
	return reqlog.Hooks{RequestStarted: func() {}, RequestDone: func(s reqlog.RequestSummary) {
		e.mu.Lock()
		e.reports = append(e.reports, s)
		e.mu.Unlock()
		e.reported <- struct{}{}
	}}
}

// settle records each settlement and the status the record had at that moment.
func (e *ended) settle(k *stored.Keeper, id string) func(accounting.Charge) int64 {
	return func(ch accounting.Charge) int64 {
		r, err := k.Get(context.Background(), owner, id)
		status := "missing"
		if err == nil {
			status = r.Status
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.charges = append(e.charges, ch)
		e.statuses = append(e.statuses, status)
		return 42
	}
}

// submit adds, records and starts one job of owner, as the server's submission does.
func submit(t *testing.T, reg *jobs.Registry, k *stored.Keeper, e *ended, call jobs.Caller) string {
	t.Helper()
	id := jobs.NewResponseID()
	j, ok := reg.Add(owner, id, 0)
	if !ok {
		t.Fatal("job refused")
	}
	rec := &stored.Record{ID: id, Status: stored.StatusQueued, Model: "sim-chat", Response: jobs.QueuedObject(id, "sim-chat", "", 1000)}
	if err := reg.Record(context.Background(), k, j, rec); err != nil {
		reg.Abandon(j)
		t.Fatal(err)
	}
	reg.Start(j, jobs.Work{Keeper: k, Call: call, Settle: e.settle(k, id), Reserve: reserve,
		Record: reqlog.Record{RequestID: "req_1", Team: "alpha", Key: "alpha-1", Model: "sim-chat", Start: time.Now()}})
	return id
}

func status(t *testing.T, k *stored.Keeper, id string) string {
	t.Helper()
	r, err := k.Get(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

func record(t *testing.T, k *stored.Keeper, id string) *stored.Record {
	t.Helper()
	r, err := k.Get(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startBlocking starts one job whose call runs until it is stopped, and waits until the
// platform "answered" (the record is in progress).
func startBlocking(t *testing.T, st store.Store, o jobs.Options) (*jobs.Registry, *stored.Keeper, *ended, string) {
	t.Helper()
	k, e := newKeeper(st), newEnded()
	o.Store, o.Hooks = st, e.hooks()
	reg := jobs.New(o)
	started := make(chan struct{})
	id := submit(t, reg, k, e, blocking(started))
	<-started
	return reg, k, e, id
}

// blocking is a call that has started and runs until its context ends (a cancel or a
// drain), then says it was cut, having streamed one delta.
func blocking(startedCh chan<- struct{}) callerFunc {
	return func(ctx context.Context, started func()) jobs.Outcome {
		started()
		close(startedCh)
		<-ctx.Done()
		u := ratelimit.Usage{InputTokens: 10, OutputTokens: 1}
		return jobs.Outcome{Cut: true, UpstreamErr: "canceled", Output: []byte(`[{"type":"message"}]`),
			Charge: accounting.EarlyCut(reserve, u, accounting.EarlyEnd)}
	}
}

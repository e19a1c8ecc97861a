// Package jobs runs background responses (POST /v1/responses with background: true).
//
// The client gets a queued response object at once, and the platform call (a plain streamed
// one: the platform never sees "background") runs in a goroutine of this instance, which
// records its progress in the stored-responses record of that id. The admission ticket taken
// at submission is held until the job ends, so a running job keeps its concurrency slot and
// its reservation. Its end is settled once, with the real usage, counted in the metrics and
// logged before its record shows it ended (run.end), whichever way it ended.
//
// Who runs a job: the instance that accepted it, named by a claim in the record store that
// the runner renews while it runs (stored.Keeper.Claim). A job whose claim is gone, or (with
// the embedded store, which one process owns) names a previous life of this process, has lost
// its runner: whoever reads it marks it failed.
//
// The package knows nothing of HTTP or of the platform: the call is a Caller and the
// settlement a func, both given by the server that submits the job.
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"modelgate/reqlog"
	"modelgate/store"
)

const (
	// defaultLease is how long a job's claim outlives a runner that stopped renewing it:
	// the longest a job cut by a crash shows as unfinished with a shared store.
	defaultLease = 30 * time.Second
	// cancelWait bounds how long a cancel waits for the job to record itself cancelled.
	cancelWait = 10 * time.Second
	// shutdownWait bounds the wait for cancelled jobs to record their end at shutdown.
	shutdownWait = 10 * time.Second
	// storeTimeout bounds each record-store call a job makes.
	storeTimeout = 5 * time.Second
)

var (
	errCancelledByClient = errors.New("cancelled by the client")
	errShutdown          = errors.New("modelgate is shutting down")
)

// Options are what a Registry needs from the server that owns it.
type Options struct {
	// Store is the record store under the keeper; an embedded one (this process's alone)
	// makes claims that never expire, reaped at the next start instead.
	Store store.Store
	// Logger and Now default to a silent logger and time.Now.
	Logger *slog.Logger
	Now    func() time.Time
	// Hooks report each job's end as a request of its own (RequestStarted, RequestDone).
	Hooks reqlog.Hooks
	// Lease is a claim's lifetime, renewed every third of it; 0 is 30s.
	Lease time.Duration
}

// Registry is the background jobs one instance runs. Create it with New.
type Registry struct {
	instance  string        // this process's id in claims: random per start
	lease     time.Duration // claim lifetime; renewed every third of it
	exclusive bool          // the record store is this process's alone (embedded)
	log       *slog.Logger
	now       func() time.Time
	hooks     reqlog.Hooks

	mu       sync.Mutex
	jobs     map[string]*Job // owner + "\x00" + id
	perOwner map[string]int64
	closed   bool
	wg       sync.WaitGroup
}

// Job is one registered background response, from Add until it ends (or is abandoned).
type Job struct {
	owner, id string
	ctx       context.Context
	cancel    context.CancelCauseFunc
	done      chan struct{}
}

// ID is the response id the job answers for.
func (j *Job) ID() string { return j.id }

// New makes an empty registry.
func New(o Options) *Registry {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Lease <= 0 {
		o.Lease = defaultLease
	}
	return &Registry{instance: "mg_" + randomHex(12), lease: o.Lease, exclusive: exclusiveStore(o.Store),
		log: o.Logger, now: o.Now, hooks: o.Hooks, jobs: map[string]*Job{}, perOwner: map[string]int64{}}
}

// exclusiveStore reports whether the record store is this process's alone.
func exclusiveStore(st store.Store) bool {
	_, ok := st.(*store.Bolt)
	return ok
}

// NewResponseID is a fresh id for a background response.
func NewResponseID() string { return "resp_" + randomHex(24) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

func jobKey(owner, id string) string { return owner + "\x00" + id }

// claimTTL is how long a claim lives unrenewed. On the embedded store it never expires: the
// next start of this process finds every claim its previous life left, however long it was
// down, and fails their records (ReapOrphans).
func (b *Registry) claimTTL() time.Duration {
	if b.exclusive {
		return 0
	}
	return b.lease
}

// Add registers a new job of owner unless owner has max unfinished already (max <= 0: no
// cap) or the registry is draining. A job added must be started (Start) or abandoned.
func (b *Registry) Add(owner, id string, max int64) (*Job, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || (max > 0 && b.perOwner[owner] >= max) {
		return nil, false
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	j := &Job{owner: owner, id: id, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	b.jobs[jobKey(owner, id)] = j
	b.perOwner[owner]++
	b.wg.Add(1)
	return j, true
}

// Abandon forgets a job that has ended, or that was refused before it started.
func (b *Registry) Abandon(j *Job) {
	b.mu.Lock()
	delete(b.jobs, jobKey(j.owner, j.id))
	if b.perOwner[j.owner]--; b.perOwner[j.owner] <= 0 {
		delete(b.perOwner, j.owner)
	}
	b.mu.Unlock()
	j.cancel(nil)
	close(j.done)
	b.wg.Done()
}

func (b *Registry) lookup(owner, id string) *Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.jobs[jobKey(owner, id)]
}

// Running reports whether this instance runs owner's job id.
func (b *Registry) Running(owner, id string) bool { return b.lookup(owner, id) != nil }

// Stop ends owner's job id when this instance runs it, as its client's cancel: its platform
// call ends and it is settled and recorded cancelled. It does not wait for that.
func (b *Registry) Stop(owner, id string) {
	if j := b.lookup(owner, id); j != nil {
		j.cancel(errCancelledByClient)
	}
}

// Drain refuses new jobs, waits for the running ones until ctx ends, then cancels what is
// left (they record themselves failed) and waits for them to write that, a bounded while.
func (b *Registry) Drain(ctx context.Context) {
	b.mu.Lock()
	b.closed = true
	n := len(b.jobs)
	b.mu.Unlock()
	if n == 0 {
		return
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	b.mu.Lock()
	for _, j := range b.jobs {
		j.cancel(errShutdown)
	}
	n = len(b.jobs)
	b.mu.Unlock()
	b.log.Warn("background responses still running at shutdown were cancelled", slog.Int("jobs", n))
	select {
	case <-done:
	case <-time.After(shutdownWait):
		b.log.Error("background responses did not record their end in time")
	}
}

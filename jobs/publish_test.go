package jobs_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/stored"
)

// step is one thing a job's end does before its record may say it ended, and the status
// the record had while it was done.
type step struct{ name, status string }

// endWatch sees each step of a job's end (settlement, metrics, the job's log line) and
// reads the job's record at that moment, as a client polling it would.
type endWatch struct {
	k  *stored.Keeper
	id string // set once the job is submitted, before it starts

	mu    sync.Mutex
	steps []step
}

func (w *endWatch) saw(name string) {
	status := "missing"
	if r, err := w.k.Get(context.Background(), owner, w.id); err == nil {
		status = r.Status
	}
	w.mu.Lock()
	w.steps = append(w.steps, step{name, status})
	w.mu.Unlock()
}

// logWatch is a slog handler that reports the job's own log line ("background response").
type logWatch struct{ w *endWatch }

func (h logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (h logWatch) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h logWatch) WithGroup(string) slog.Handler            { return h }
func (h logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "background response" {
		h.w.saw("log")
	}
	return nil
}

// TestEndIsPublishedLast: whichever way a job ends, its record says so only after the job
// was settled, counted in the metrics and logged, each once: a client that reads the end
// finds it in the ledger, /admin/usage, /metrics and the log already.
func TestEndIsPublishedLast(t *testing.T) {
	answered := func(o jobs.Outcome) callerFunc {
		return func(_ context.Context, started func()) jobs.Outcome {
			started()
			return o
		}
	}
	tests := []struct {
		name   string
		call   func(startedCh chan<- struct{}) jobs.Caller
		stop   func(reg *jobs.Registry, id string) // after the call started
		status string
	}{
		{"completed", func(chan<- struct{}) jobs.Caller {
			return answered(jobs.Outcome{Status: stored.StatusCompleted, Final: []byte(`{"status":"completed"}`),
				Charge: accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 2})})
		}, nil, stored.StatusCompleted},
		{"incomplete", func(chan<- struct{}) jobs.Caller {
			return answered(jobs.Outcome{Status: stored.StatusIncomplete, Final: []byte(`{"status":"incomplete"}`),
				Charge: accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 100})})
		}, nil, stored.StatusIncomplete},
		{"failed", func(chan<- struct{}) jobs.Caller {
			return answered(jobs.Outcome{Status: stored.StatusFailed, UpstreamErr: "stream_idle",
				Error:  jobs.ResponseError{Code: "server_error", Message: "stopped"},
				Charge: accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10}, accounting.StreamCut)})
		}, nil, stored.StatusFailed},
		{"cancelled", func(ch chan<- struct{}) jobs.Caller { return blocking(ch) },
			func(reg *jobs.Registry, id string) { reg.Stop(owner, id) }, stored.StatusCancelled},
		{"drained", func(ch chan<- struct{}) jobs.Caller { return blocking(ch) },
			func(reg *jobs.Registry, _ string) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // the drain deadline has passed
				reg.Drain(ctx)
			}, stored.StatusFailed},
		{"panicked", func(chan<- struct{}) jobs.Caller {
			return callerFunc(func(context.Context, func()) jobs.Outcome { panic("boom") })
		}, nil, stored.StatusFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := shared{boltStore(t)}
			k := newKeeper(st)
			w := &endWatch{k: k, id: jobs.NewResponseID()}
			reg := jobs.New(jobs.Options{Store: st, Logger: slog.New(logWatch{w}), Hooks: reqlog.Hooks{
				RequestStarted: func() {}, RequestDone: func(reqlog.RequestSummary) { w.saw("metrics") }}})
			j, ok := reg.Add(owner, w.id, 0)
			if !ok {
				t.Fatal("job refused")
			}
			rec := &stored.Record{ID: w.id, Status: stored.StatusQueued, Model: "sim-chat", Response: jobs.QueuedObject(w.id, "sim-chat", "", 1000)}
			if err := reg.Record(context.Background(), k, j, rec); err != nil {
				t.Fatal(err)
			}
			startedCh := make(chan struct{})
			reg.Start(j, jobs.Work{Keeper: k, Call: tc.call(startedCh), Reserve: reserve,
				Settle: func(accounting.Charge) int64 { w.saw("settle"); return 42 },
				Record: reqlog.Record{RequestID: "req_1", Team: "alpha", Key: "alpha-1", Model: "sim-chat"}})
			if tc.stop != nil {
				<-startedCh
				tc.stop(reg, w.id)
			}
			reg.Drain(context.Background()) // waits for the job to end

			if got := status(t, k, w.id); got != tc.status {
				t.Errorf("the job ended %s, want %s", got, tc.status)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			want := []string{"settle", "metrics", "log"}
			if len(w.steps) != len(want) {
				t.Fatalf("the end's steps: %v, want %v, each once", w.steps, want)
			}
			for i, s := range w.steps {
				if s.name != want[i] || !stored.Unfinished(s.status) {
					t.Errorf("step %d: %s with the record %s; want %s while it is unfinished", i, s.name, s.status, want[i])
				}
			}
		})
	}
}

package jobs_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/stored"
)

// TestRunEnds: however the platform call ends, the job settles once, while its record is
// still unfinished (a client that sees the end sees it counted), reports that end to the
// metrics, then records it and drops its claim.
func TestRunEnds(t *testing.T) {
	final := `{"id":"platform_id","status":"completed","model":"platform-model","created_at":5,"output":[{"type":"message"}],"usage":{"input_tokens":3,"output_tokens":2}}`
	tests := []struct {
		name       string
		outcome    jobs.Outcome
		status     string
		httpStatus int
		errCode    string
		output     int64 // output items the record ends with
	}{
		{"completed", jobs.Outcome{Status: stored.StatusCompleted, Final: []byte(final),
			Charge: accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 2})},
			stored.StatusCompleted, http.StatusOK, "", 1},
		{"platform_refused", jobs.Outcome{Status: stored.StatusFailed, FailStatus: 429, UpstreamErr: "rate_limited",
			Error: jobs.ResponseError{Code: "rate_limit_exceeded", Message: "slow down"}},
			stored.StatusFailed, 429, "rate_limit_exceeded", 0},
		{"stream_cut", jobs.Outcome{Status: stored.StatusFailed, UpstreamErr: "stream_idle", Output: []byte(`[{"type":"message"},{"type":"message"}]`),
			Error:  jobs.ResponseError{Code: "server_error", Message: "stopped"},
			Charge: accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 4}, accounting.StreamCut)},
			stored.StatusFailed, http.StatusBadGateway, "server_error", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := shared{boltStore(t)}
			k, e := newKeeper(st), newEnded()
			reg := jobs.New(jobs.Options{Store: st, Hooks: e.hooks()})
			id := submit(t, reg, k, e, callerFunc(func(ctx context.Context, started func()) jobs.Outcome {
				started()
				return tc.outcome
			}))
			reg.Drain(context.Background()) // waits for the job to end
			r := record(t, k, id)
			obj := gjson.ParseBytes(r.Response)
			if r.Status != tc.status || obj.Get("status").Str != tc.status || obj.Get("error.code").Str != tc.errCode ||
				obj.Get("output.#").Int() != tc.output || obj.Get("id").Str != id || obj.Get("model").Str != "sim-chat" ||
				obj.Get("created_at").Int() != 1000 || !obj.Get("background").Bool() {
				t.Errorf("record %s: %s", r.Status, r.Response)
			}
			if tc.status == stored.StatusCompleted && obj.Get("completed_at").Type == gjson.Null {
				t.Errorf("no completed_at: %s", r.Response)
			}
			if runner, _ := k.Runner(context.Background(), owner, id); runner != "" {
				t.Errorf("claim left to %q", runner)
			}
			if len(e.charges) != 1 || e.charges[0] != tc.outcome.Charge || !stored.Unfinished(e.statuses[0]) {
				t.Errorf("settled %+v with the record %v", e.charges, e.statuses)
			}
			if len(e.reports) != 1 || e.reports[0].Status != tc.httpStatus || e.reports[0].Route != jobs.Route ||
				e.reports[0].CostMicros != 42 || e.reports[0].UpstreamErr != tc.outcome.UpstreamErr || e.reports[0].ErrorCode != tc.errCode {
				t.Errorf("reported %+v", e.reports)
			}
		})
	}
}

// TestRunCutShort: a job its context ended is cancelled when its client stopped it, and
// failed with the shutdown error when a drain did; either way it keeps the output it had.
func TestRunCutShort(t *testing.T) {
	tests := []struct {
		name       string
		stop       func(reg *jobs.Registry, id string)
		status     string
		httpStatus int
		errCode    string
	}{
		{"client_cancel", func(reg *jobs.Registry, id string) {
			reg.Stop(owner, id)
			reg.Drain(context.Background())
		}, stored.StatusCancelled, 499, ""},
		{"drain", func(reg *jobs.Registry, _ string) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the drain deadline has passed
			reg.Drain(ctx)
		}, stored.StatusFailed, http.StatusServiceUnavailable, "server_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, k, e, id := startBlocking(t, boltStore(t), jobs.Options{})
			if got := status(t, k, id); got != stored.StatusInProgress {
				t.Fatalf("a started job reads %s", got)
			}
			tc.stop(reg, id)
			r := record(t, k, id)
			obj := gjson.ParseBytes(r.Response)
			if r.Status != tc.status || obj.Get("error.code").Str != tc.errCode || obj.Get("output.#").Int() != 1 {
				t.Errorf("record: %s", r.Response)
			}
			if len(e.reports) != 1 || e.reports[0].Status != tc.httpStatus || len(e.charges) != 1 {
				t.Errorf("reported %+v, settled %+v", e.reports, e.charges)
			}
		})
	}
}

// TestRunPanicSettlesOnce: a call that panics still ends the job: settled once at the
// reservation's bound, before the record shows it failed, and reported after that
// settlement with the error it records.
func TestRunPanicSettlesOnce(t *testing.T) {
	st := boltStore(t)
	k, e := newKeeper(st), newEnded()
	reg := jobs.New(jobs.Options{Store: st, Hooks: e.hooks()})
	id := submit(t, reg, k, e, callerFunc(func(context.Context, func()) jobs.Outcome { panic("boom") }))
	reg.Drain(context.Background())
	r := record(t, k, id)
	if r.Status != stored.StatusFailed || gjson.GetBytes(r.Response, "error.code").Str != "server_error" {
		t.Errorf("record: %s", r.Response)
	}
	want := accounting.UpperBound(reserve, ratelimit.Usage{}, accounting.StreamCut)
	if len(e.charges) != 1 || e.charges[0] != want || !stored.Unfinished(e.statuses[0]) {
		t.Errorf("settled %+v with the record %v", e.charges, e.statuses)
	}
	if len(e.reports) != 1 || e.reports[0].CostMicros != 42 || e.reports[0].ErrorCode != "server_error" {
		t.Errorf("reported %+v", e.reports)
	}
}

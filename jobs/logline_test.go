package jobs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/apitest"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/reqlog"
	"modelgate/stored"
)

// TestJobLineIsARequestLine (issue 42): a job's end line carries every field of a request's
// access-log line, read from the record its submission derived (attribution included), with
// the status the record ends in beside them.
func TestJobLineIsARequestLine(t *testing.T) {
	var logs apitest.SyncBuffer
	st := shared{boltStore(t)}
	k, e := newKeeper(st), newEnded()
	reg := jobs.New(jobs.Options{Store: st, Hooks: e.hooks(), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	id := jobs.NewResponseID()
	j, ok := reg.Add(owner, id, 0)
	if !ok {
		t.Fatal("job refused")
	}
	if err := reg.Record(context.Background(), k, j, &stored.Record{ID: id, Status: stored.StatusQueued, Model: "sim-chat",
		Response: jobs.QueuedObject(id, "sim-chat", "", 1000)}); err != nil {
		t.Fatal(err)
	}
	rec := reqlog.Record{RequestID: "req_1", ClientRequestID: "mine-1", Route: "/v1/responses", Team: "alpha", Key: "alpha-1",
		Model: "sim-chat", Start: time.Now(), EndUser: "u-1", Tags: "feature:search", InputReserved: 12, UpstreamModel: "sim-chat-v2"}
	reg.Start(j, jobs.Work{Keeper: k, Reserve: reserve, Settle: e.settle(k, id), Record: rec,
		Call: callerFunc(func(_ context.Context, started func()) jobs.Outcome {
			started()
			return jobs.Outcome{Status: stored.StatusCompleted, Final: []byte(`{"status":"completed"}`),
				Charge: accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 2})}
		})})
	reg.Drain(context.Background()) // waits for the job to end

	var request, job map[string]any
	sum := reqlog.RequestSummary{RequestID: "req_0", Method: "POST", Route: "/v1/responses", Status: 200, TraceID: "t",
		UpstreamModel: "m", EndUser: "u", Tags: "k:v", ClientRequestID: "c"}
	var reqLine apitest.SyncBuffer
	sum.Log(slog.New(slog.NewJSONHandler(&reqLine, nil)), "request", slog.Attr{})
	if err := json.Unmarshal([]byte(reqLine.String()), &request); err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"background response"`) {
			if err := json.Unmarshal([]byte(line), &job); err != nil {
				t.Fatal(err)
			}
		}
	}
	if job == nil {
		t.Fatalf("no background response line in\n%s", logs.String())
	}
	for _, f := range slices.Sorted(maps.Keys(request)) {
		if _, ok := job[f]; !ok && f != "trace_id" && f != "msg" { // a job is not traced
			t.Errorf("the job's line has no %q: %v", f, job)
		}
	}
	want := map[string]any{"request_id": "req_1", "client_request_id": "mine-1", "route": jobs.Route, "method": "POST",
		"team": "alpha", "key": "alpha-1", "model": "sim-chat", "status": 200.0, "response_status": "completed",
		"input_tokens": 3.0, "output_tokens": 2.0, "input_reserved": 12.0, "end_user": "u-1", "tags": "feature:search",
		"upstream_model": "sim-chat-v2"}
	for f, v := range want {
		if job[f] != v {
			t.Errorf("%s = %v, want %v", f, job[f], v)
		}
	}
}

package jobs_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/stored"
)

func sse(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

const textDelta = `{"type":"response.output_text.delta","delta":"hi"}`

// answer is a platform answer of the given content type whose body is r; cancel closes r,
// as ending a real call ends its body's reads.
func answer(contentType string, r *io.PipeReader, idle time.Duration) jobs.Answer {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {contentType}}, Body: r}
	return jobs.Answer{Resp: resp, Cancel: func() { r.CloseWithError(context.Canceled) }, Idle: idle, Reserve: reserve}
}

// TestReadAnswerEnds: each way a platform's answer can end maps to the status, the error
// recorded, the failure kind logged and the charge a foreground relay would settle.
func TestReadAnswerEnds(t *testing.T) {
	completed := sse("response.completed", `{"type":"response.completed","response":{"status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":1}}}`)
	tests := []struct {
		name, contentType, stream string
		closeAfter                bool // end the body after the stream (false: leave it open)
		idle                      time.Duration
		status, upstreamErr       string
		started, final            bool
		charge                    accounting.Charge
	}{
		{"completed", "text/event-stream", sse("response.output_text.delta", textDelta) + completed, true, 0,
			stored.StatusCompleted, "", true, true, accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 1})},
		{"error_event", "text/event-stream", sse("response.output_text.delta", textDelta) + sse("error", `{"type":"error","code":"c","message":"m"}`), true, 0,
			stored.StatusFailed, "stream_error", true, false, accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.StreamCut)},
		{"not_an_event_stream", "application/json", "", true, 0,
			stored.StatusFailed, "invalid_body", false, false, accounting.UpperBound(reserve, ratelimit.Usage{}, accounting.BadBody)},
		// A body that ends before any terminal event logs "reset", as the Responses
		// pass-through does (relay.StreamEndKind of io.EOF).
		{"truncated", "text/event-stream", sse("response.output_text.delta", textDelta), true, 0,
			stored.StatusFailed, "reset", true, false, accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.StreamCut)},
		{"malformed", "text/event-stream", "data: {nope\n\n", true, 0,
			stored.StatusFailed, "stream_invalid", true, false, accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10}, accounting.StreamCut)},
		{"platform_silent", "text/event-stream", sse("response.output_text.delta", textDelta), false, 20 * time.Millisecond,
			stored.StatusFailed, "stream_idle", true, false, accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.StreamCut)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				if tc.stream != "" { // an empty write to a pipe still waits for a reader
					_, _ = io.WriteString(pw, tc.stream)
				}
				if tc.closeAfter {
					pw.Close()
				}
			}()
			started := false
			o := jobs.ReadAnswer(context.Background(), answer(tc.contentType, pr, tc.idle), func() { started = true })
			if o.Status != tc.status || o.UpstreamErr != tc.upstreamErr || started != tc.started || (o.Final != nil) != tc.final || o.Cut {
				t.Errorf("got status=%q upstreamErr=%q started=%v final=%s cut=%v", o.Status, o.UpstreamErr, started, o.Final, o.Cut)
			}
			if o.Charge != tc.charge {
				t.Errorf("charge %+v, want %+v", o.Charge, tc.charge)
			}
			if !tc.final && o.Error.Message == "" {
				t.Error("a failed answer recorded no error message")
			}
		})
	}
}

// TestReadAnswerCutByJob: a job cancelled (or shut down) mid-stream is modelgate's own cut,
// charged what was read plus the in-flight allowance, and left for the job to name.
func TestReadAnswerCutByJob(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := answer("text/event-stream", pr, 0)
	context.AfterFunc(ctx, a.Cancel) // as a real call's context ends its body
	go func() {
		// A pipe write returns once the reader took all of it: the delta is read before
		// the job is cancelled.
		_, _ = io.WriteString(pw, sse("response.output_text.delta", textDelta))
		cancel()
	}()
	o := jobs.ReadAnswer(ctx, a, func() {})
	want := accounting.EarlyCut(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.EarlyEnd)
	if !o.Cut || o.UpstreamErr != "canceled" || o.Charge != want {
		t.Errorf("got cut=%v upstreamErr=%q charge=%+v, want a cut charged %+v", o.Cut, o.UpstreamErr, o.Charge, want)
	}
}

package proxy

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/stored"
)

var jobReserve = ratelimit.Usage{InputTokens: 10, OutputTokens: 100}

func jobSSE(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

const jobTextDelta = `{"type":"response.output_text.delta","delta":"hi"}`

// jobAnswer is a platform answer of the given content type whose body is r; its cancel
// closes r, as ending a real call ends its body's reads.
func jobAnswer(contentType string, r *io.PipeReader) (*http.Response, context.CancelFunc) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {contentType}}, Body: r}
	return resp, func() { r.CloseWithError(context.Canceled) }
}

// TestReadJobAnswerEnds: each way a platform's answer to a job can end, read through the
// relay's pump, maps to the status, the error recorded, the failure kind logged and the
// charge a foreground relay would settle; started is called once the event stream began.
func TestReadJobAnswerEnds(t *testing.T) {
	completed := jobSSE("response.completed", `{"type":"response.completed","response":{"status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":1}}}`)
	streamCut := accounting.UpperBound(jobReserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.StreamCut)
	tests := []struct {
		name, contentType, stream string
		closeAfter                bool // end the body after the stream (false: leave it open)
		idle                      time.Duration
		status, upstreamErr       string
		started, final            bool
		charge                    accounting.Charge
	}{
		{"completed", "text/event-stream", jobSSE("response.output_text.delta", jobTextDelta) + completed, true, 0,
			stored.StatusCompleted, "", true, true, accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 1})},
		{"error_event", "text/event-stream", jobSSE("response.output_text.delta", jobTextDelta) + jobSSE("error", `{"type":"error","code":"c","message":"m"}`), true, 0,
			stored.StatusFailed, "stream_error", true, false, streamCut},
		{"not_an_event_stream", "application/json", "", true, 0,
			stored.StatusFailed, "invalid_body", false, false, accounting.UpperBound(jobReserve, ratelimit.Usage{}, accounting.BadBody)},
		// A body that ends before any terminal event logs "reset", as the Responses
		// pass-through does (relay.StreamEndKind of io.EOF).
		{"truncated", "text/event-stream", jobSSE("response.output_text.delta", jobTextDelta), true, 0,
			stored.StatusFailed, "reset", true, false, streamCut},
		{"malformed", "text/event-stream", "data: {nope\n\n", true, 0,
			stored.StatusFailed, "stream_invalid", true, false, accounting.UpperBound(jobReserve, ratelimit.Usage{InputTokens: 10}, accounting.StreamCut)},
		{"platform_silent", "text/event-stream", jobSSE("response.output_text.delta", jobTextDelta), false, 20 * time.Millisecond,
			stored.StatusFailed, "stream_idle", true, false, streamCut},
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
			resp, cancel := jobAnswer(tc.contentType, pr)
			defer cancel()
			started := 0
			o := readJobAnswer(context.Background(), resp, cancel, tc.idle, jobReserve, func() { started++ })
			if o.Status != tc.status || o.UpstreamErr != tc.upstreamErr || (started == 1) != tc.started || started > 1 || (o.Final != nil) != tc.final || o.Cut {
				t.Errorf("got status=%q upstreamErr=%q started=%d final=%s cut=%v", o.Status, o.UpstreamErr, started, o.Final, o.Cut)
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

// TestReadJobAnswerCutByJob: a job cancelled (or shut down) mid-stream is modelgate's own
// cut, charged what was read plus the in-flight allowance, and left for the job to name.
func TestReadJobAnswerCutByJob(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, end := jobAnswer("text/event-stream", pr)
	context.AfterFunc(ctx, end) // as a real call's context ends its body
	go func() {
		// A pipe write returns once the reader took all of it: the delta is read before
		// the job is cancelled.
		_, _ = io.WriteString(pw, jobSSE("response.output_text.delta", jobTextDelta))
		cancel()
	}()
	o := readJobAnswer(ctx, resp, end, 0, jobReserve, func() {})
	want := accounting.EarlyCut(jobReserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.EarlyEnd)
	if !o.Cut || o.UpstreamErr != "canceled" || o.Charge != want {
		t.Errorf("got cut=%v upstreamErr=%q charge=%+v, want a cut charged %+v", o.Cut, o.UpstreamErr, o.Charge, want)
	}
}

// TestReadJobAnswerDrains: a completed job's answer is read to its end (bounded) after the
// terminal event, so the platform's connection can be reused.
func TestReadJobAnswerDrains(t *testing.T) {
	pr, pw := io.Pipe()
	trailer := ": done\n\n"
	read := make(chan struct{})
	go func() {
		_, _ = io.WriteString(pw, jobSSE("response.completed", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":3,"output_tokens":1}}}`))
		// Returns only once the drain took it.
		if _, err := io.WriteString(pw, trailer); err == nil {
			close(read)
		}
		pw.Close()
	}()
	resp, cancel := jobAnswer("text/event-stream", pr)
	o := readJobAnswer(context.Background(), resp, cancel, 0, jobReserve, func() {})
	if o.Status != stored.StatusCompleted {
		t.Fatalf("status %q", o.Status)
	}
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the rest of the answer was not read after its terminal event")
	}
}

package jobs_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/stored"
)

// pumped reads a platform stream as a job's call does (proxy's readJobAnswer): through the
// relay's pump, with a job sink as its client.
func pumped(ctx context.Context, body io.Reader) jobs.Outcome {
	var sink jobs.Sink
	p := relay.Pump{Out: relay.SinkWriter(&sink), Obs: sink.Observer(), Client: ctx, Reserve: reserve}
	defer p.Out.Stop()
	return sink.Outcome(p.Responses(body, func() {}))
}

func bgEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// TestSinkOutcome: what a job records of each way the platform's stream can end, read
// through the relay's pump: the status, the final object or the output items and the
// error, the failure kind logged, and the pump's charge.
func TestSinkOutcome(t *testing.T) {
	item := `{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"hi"}]}`
	delta := bgEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"hi"}`)
	itemDone := bgEvent("response.output_item.done", `{"type":"response.output_item.done","item":`+item+`}`)
	cut := func(out int64) accounting.Charge {
		return accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: reserve.InputTokens, OutputTokens: out}, accounting.StreamCut)
	}
	tests := []struct {
		name, stream        string
		status, upstreamErr string
		final               bool
		outputItems         int64
		errCode             string
		charge              accounting.Charge
	}{
		{"completed", delta + itemDone + bgEvent("response.completed",
			`{"type":"response.completed","response":{"id":"r","status":"completed","output":[`+item+`],"usage":{"input_tokens":3,"output_tokens":1}}}`),
			stored.StatusCompleted, "", true, 0, "", accounting.Known(ratelimit.Usage{InputTokens: 3, OutputTokens: 1})},
		{"incomplete_without_status", bgEvent("response.incomplete", `{"type":"response.incomplete","response":{"id":"r"}}`),
			stored.StatusIncomplete, "", true, 0, "", cut(0)},
		{"terminal_named_by_its_data", `data: {"type":"response.incomplete","response":{"id":"r"}}` + "\n\n",
			stored.StatusIncomplete, "", true, 0, "", cut(0)},
		{"platform_says_cancelled_on_completed", bgEvent("response.completed", `{"type":"response.completed","response":{"status":"cancelled"}}`),
			stored.StatusCompleted, "", true, 0, "", cut(0)},
		{"failed", bgEvent("response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"x"}}}`),
			stored.StatusFailed, "", true, 0, "", cut(0)},
		{"error_event", delta + delta + itemDone + bgEvent("error", `{"type":"error","code":"rate_limit_exceeded","message":"slow down"}`),
			stored.StatusFailed, "stream_error", false, 1, "rate_limit_exceeded", cut(2)},
		{"nested_error_event", bgEvent("error", `{"type":"error","error":{"code":"c","message":"m"}}`),
			stored.StatusFailed, "stream_error", false, 0, "c", cut(0)},
		// The relay's own error event that closes a broken stream is not the platform's: the
		// job records its own error ("server_error"), and the kind the relay named.
		{"cut_short", delta + itemDone + delta, stored.StatusFailed, "reset", false, 1, "server_error", cut(2)},
		{"not_json", delta + "data: {nope\n\n", stored.StatusFailed, "stream_invalid", false, 0, "server_error", cut(1)},
		{"not_sse", "HTTP/1.1 200 OK\n\n", stored.StatusFailed, "stream_invalid", false, 0, "server_error", cut(0)},
		{"terminal_without_response", bgEvent("response.completed", `{"type":"response.completed"}`),
			stored.StatusFailed, "stream_invalid", false, 0, "server_error", cut(0)},
		{"terminal_without_data", "event: response.completed\n\n", stored.StatusFailed, "stream_invalid", false, 0, "server_error", cut(0)},
		{"nested_too_deep", "data: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n\n",
			stored.StatusFailed, "stream_invalid", false, 0, "server_error", cut(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := pumped(context.Background(), strings.NewReader(tc.stream))
			if o.Status != tc.status || o.UpstreamErr != tc.upstreamErr || (o.Final != nil) != tc.final || o.Error.Code != tc.errCode || o.Cut {
				t.Errorf("got status=%q upstreamErr=%q final=%s err=%+v cut=%v", o.Status, o.UpstreamErr, o.Final, o.Error, o.Cut)
			}
			if !tc.final && o.Error.Message == "" {
				t.Error("a failed answer recorded no error message")
			}
			if got := gjson.GetBytes(o.Output, "#").Int(); got != tc.outputItems {
				t.Errorf("output items %d, want %d: %s", got, tc.outputItems, o.Output)
			}
			if o.Charge != tc.charge {
				t.Errorf("charge %+v, want %+v", o.Charge, tc.charge)
			}
		})
	}
}

// TestSinkCutByJob: a job cancelled (or shut down) mid-stream is modelgate's own cut,
// charged what was read plus the in-flight allowance, and left for the job to name.
func TestSinkCutByJob(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	context.AfterFunc(ctx, func() { pr.CloseWithError(context.Canceled) }) // as a real call's context ends its body
	go func() {
		// A pipe write returns once the reader took all of it: the delta is read before
		// the job is cancelled.
		_, _ = io.WriteString(pw, bgEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"hi"}`))
		cancel()
	}()
	o := pumped(ctx, pr)
	want := accounting.EarlyCut(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.EarlyEnd)
	if !o.Cut || o.UpstreamErr != "canceled" || o.Charge != want {
		t.Errorf("got cut=%v upstreamErr=%q charge=%+v, want a cut charged %+v", o.Cut, o.UpstreamErr, o.Charge, want)
	}
}

// FuzzSink: whatever the platform streams, the job ends with a status it may record, output
// that is a JSON array (or none), a final object that is JSON, and an error message
// whenever there is no final object.
func FuzzSink(f *testing.F) {
	f.Add(bgEvent("response.output_item.done", `{"item":{"a":1}}`) + bgEvent("response.completed", `{"response":{"status":"completed","usage":{}}}`))
	f.Add(bgEvent("error", `{"code":1,"message":[]}`))
	f.Add("data: {}\r\n\r\ndata: [\n\n")
	f.Add(bgEvent("response.failed", `{"response":{"status":"queued"}}`))
	f.Fuzz(func(t *testing.T, stream string) {
		o := pumped(context.Background(), strings.NewReader(stream))
		switch o.Status {
		case stored.StatusCompleted, stored.StatusIncomplete, stored.StatusFailed:
		default:
			t.Fatalf("status %q", o.Status)
		}
		if o.Cut {
			t.Fatal("a stream nobody cancelled ended as a cut")
		}
		if len(o.Output) > 0 && !gjson.ValidBytes(o.Output) {
			t.Fatalf("output not JSON: %q", o.Output)
		}
		if o.Final != nil && !gjson.ValidBytes(o.Final) {
			t.Fatalf("final object not JSON: %q", o.Final)
		}
		if o.Final == nil && o.Error.Message == "" {
			t.Fatalf("no final object and no error: %+v", o)
		}
	})
}

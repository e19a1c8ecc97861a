package reqlog

import (
	"strings"
	"testing"
	"time"
)

// A summary carries the record's figures as they are, with the model cut to the logged bound
// and made printable, and the duration measured from the record's start.
func TestRecordSummary(t *testing.T) {
	r := &Record{Start: time.Now().Add(-time.Second), RequestID: "req_1", Route: "/v1/responses", Team: "alpha", Key: "k1",
		Model: strings.Repeat("m", 10) + "\x07", Stream: true, InputTokens: 3, OutputTokens: 4, Attempts: 2,
		ErrCode: "e", Refusal: "r", TTFB: time.Millisecond, UpstreamErr: "timeout", UsageEstimated: "no_answer"}
	got := r.Summary("POST", 502, 8)
	want := RequestSummary{RequestID: "req_1", Route: "/v1/responses", Method: "POST", Team: "alpha", Key: "k1",
		Model: "mmmmmmmm", Status: 502, Stream: true, TTFB: time.Millisecond, InputTokens: 3, OutputTokens: 4,
		Attempts: 2, ErrorCode: "e", Refusal: "r", UpstreamErr: "timeout", UsageEstimated: "no_answer"}
	if got.Duration < time.Second {
		t.Errorf("duration %v, want at least the second since the start", got.Duration)
	}
	got.Duration = 0
	if got != want {
		t.Errorf("summary\n got %+v\nwant %+v", got, want)
	}
	if s := (&Record{Model: "a\nb"}).Summary("GET", 200, 64); s.Model != "a?b" {
		t.Errorf("model %q, want it printable", s.Model)
	}
}

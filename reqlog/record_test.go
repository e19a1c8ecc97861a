package reqlog

import (
	"reflect"
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

// ForAttempt carries every field of the request's record but its outcome (issue 42): a field
// added to Record later follows by itself; only the outcome listed here starts anew.
func TestForAttemptCarriesTheRequest(t *testing.T) {
	outcome := map[string]bool{"ServedModel": true, "InputTokens": true, "OutputTokens": true, "CachedTokens": true,
		"ReasoningTokens": true, "CostMicros": true, "UsageEstimated": true, "Admitted": true, "BilledLater": true,
		"Attempts": true, "ErrCode": true, "Refusal": true, "TTFB": true, "UpstreamErr": true, "ClientClosed": true, "Turns": true}
	var req Record
	v := reflect.ValueOf(&req).Elem()
	for i := range v.NumField() { // every field set to something other than its zero
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(time.Unix(int64(i+1), 0)))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	a := req.ForAttempt("fallback-model", "first_token_timeout")
	if a.ServedModel != "fallback-model" || a.UpstreamErr != "first_token_timeout" || !a.Admitted {
		t.Errorf("attempt names %q, %q, admitted %v", a.ServedModel, a.UpstreamErr, a.Admitted)
	}
	av := reflect.ValueOf(a)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		switch {
		case name == "ServedModel" || name == "UpstreamErr" || name == "Admitted":
		case outcome[name] && !av.Field(i).IsZero():
			t.Errorf("%s = %v: the request's outcome is not the attempt's", name, av.Field(i))
		case !outcome[name] && !reflect.DeepEqual(av.Field(i).Interface(), v.Field(i).Interface()):
			t.Errorf("%s = %v, want the request's %v", name, av.Field(i), v.Field(i))
		}
	}
	if d := req.Derive(); d.EndUser != req.EndUser || d.Tags != req.Tags || d.Admitted || d.ServedModel != "" {
		t.Errorf("derived %+v", d)
	}
}

package upstream

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// The policy in isolation, for what the end-to-end table cannot reach cheaply.
func TestRetryPolicyDecide(t *testing.T) {
	p := DefaultPolicy(2)
	p.Jitter = func() float64 { return 0.5 }
	resp := func(code int, h ...string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "refused"}}
	readErr := &net.OpError{Op: "read", Net: "tcp", Err: &net.AddrError{Err: "reset"}}
	tests := []struct {
		name      string
		done      int
		resp      *http.Response
		err       error
		remaining time.Duration
		wantWait  time.Duration
		wantAgain bool
	}{
		{"dial_error", 1, nil, dialErr, time.Minute, 75 * time.Millisecond, true},
		{"dial_error_second_backoff_doubles", 2, nil, dialErr, time.Minute, 150 * time.Millisecond, true},
		{"dial_error_retries_exhausted", 3, nil, dialErr, time.Minute, 0, false},
		{"read_error_after_send", 1, nil, readErr, time.Minute, 0, false},
		{"deadline_exceeded", 1, nil, context.DeadlineExceeded, time.Minute, 0, false},
		{"backoff_beyond_deadline", 1, resp(503), nil, 10 * time.Millisecond, 0, false},
		{"retry_after_fits", 1, resp(429, "Retry-After", "2"), nil, 3 * time.Second, 2 * time.Second, true},
		{"retry_after_too_long", 1, resp(429, "Retry-After", "4"), nil, 3 * time.Second, 0, false},
		{"retry_after_negative_is_garbage", 1, resp(429, "Retry-After", "-1"), nil, time.Minute, 75 * time.Millisecond, true},
		{"retry_after_ms_fractional", 1, resp(503, "Retry-After-Ms", "12.5"), nil, time.Minute, 12500 * time.Microsecond, true},
		{"past_http_date_is_zero", 1, resp(503, "Retry-After", "Mon, 02 Jan 2006 15:04:05 GMT"), nil, time.Minute, 0, true},
		{"status_408_not_retried", 1, resp(408), nil, time.Minute, 0, false},
		{"status_409_not_retried", 1, resp(409), nil, time.Minute, 0, false},
		{"status_501_not_retried", 1, resp(501), nil, time.Minute, 0, false},
		{"no_answer_no_error", 1, nil, nil, time.Minute, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, again := p.Decide(tt.done, tt.resp, tt.err, tt.remaining)
			if again != tt.wantAgain || (again && wait != tt.wantWait) {
				t.Errorf("decide = (%v, %t), want (%v, %t)", wait, again, tt.wantWait, tt.wantAgain)
			}
		})
	}
}

// FuzzRetryAfter: whatever the platform sends in its retry headers, the wait read from them
// is never negative and never beyond what the parser bounds (a million seconds), and a header
// that says nothing usable leaves the backoff to apply.
func FuzzRetryAfter(f *testing.F) {
	for _, seed := range [][2]string{{"", "2"}, {"12.5", ""}, {"-1", "-1"}, {"", "Mon, 02 Jan 2006 15:04:05 GMT"}, {"1e12", "NaN"}, {"", "Inf"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, ms, secs string) {
		h := http.Header{}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if secs != "" {
			h.Set("Retry-After", secs)
		}
		wait, ok := RetryAfter(h)
		if wait < 0 {
			t.Fatalf("RetryAfter(%q, %q) = %v, negative", ms, secs, wait)
		}
		if !ok && wait != 0 {
			t.Fatalf("RetryAfter(%q, %q) = %v without a value", ms, secs, wait)
		}
		if ok && wait > 1e6*time.Second && !isDate(secs) {
			t.Fatalf("RetryAfter(%q, %q) = %v, beyond the bound", ms, secs, wait)
		}
	})
}

// isDate reports whether v parses as an HTTP date: a date far ahead is the platform's word.
func isDate(v string) bool {
	_, err := http.ParseTime(v)
	return err == nil
}

package reqbody_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelgate/reqbody"
)

// readResult is what a test server's handler saw.
type readResult struct {
	err      error
	took     time.Duration
	canceled bool // the request's context was done after a wait past the deadline
}

// deadlineServer serves each request by reading its body with timeout; after a whole read
// it waits past the time the deadline would have fired (it was set when the read began), so
// a deadline left on the connection would have cut the wait, and answers 200.
func deadlineServer(t *testing.T, timeout time.Duration) (string, <-chan readResult) {
	t.Helper()
	results := make(chan readResult, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, err := reqbody.Read(w, r, reqbody.Limits{MaxBytes: 64 << 20, Timeout: timeout})
		res := readResult{err: err, took: time.Since(start)}
		if err != nil {
			w.WriteHeader(kindOf(err).Status())
			results <- res
			return
		}
		select {
		case <-r.Context().Done():
		case <-time.After(timeout + 250*time.Millisecond):
		}
		res.canceled = r.Context().Err() != nil
		results <- res
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), results
}

// TestReadDeadline: a body that stops arriving is cut at Limits.Timeout, plain or gzip; a
// body read whole has its deadline lifted, so the wait after it (a long answer, a stream)
// is never cut by it.
func TestReadDeadline(t *testing.T) {
	// A stalled body is cut at a short deadline; a whole body gets a deadline long enough for
	// any read of it on a loaded machine under -race (inflating 8 MiB took over 150 ms there),
	// so only a deadline left on the connection after the read can fire.
	const stalledTimeout, wholeTimeout = 150 * time.Millisecond, 2 * time.Second
	bomb := zeros(t, 8<<20)
	whole := `{"model":"m"}`
	cases := []struct {
		name     string
		declared int
		sent     string
		encoding string
		kind     reqbody.Kind
	}{
		{name: "plain_stalled", declared: 4096, sent: `{"model":"m","input":[`, kind: reqbody.TimedOut},
		{name: "gzip_stalled", declared: len(bomb), sent: string(bomb[:len(bomb)/2]), encoding: "gzip", kind: reqbody.TimedOut},
		{name: "whole", declared: len(whole), sent: whole},
		{name: "whole_gzip", declared: len(bomb), sent: string(bomb), encoding: "gzip"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			timeout := wholeTimeout
			if tc.kind == reqbody.TimedOut {
				timeout = stalledTimeout
			}
			addr, results := deadlineServer(t, timeout)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n", tc.declared)
			if tc.encoding != "" {
				head += "Content-Encoding: " + tc.encoding + "\r\n"
			}
			if _, err := io.WriteString(conn, head+"\r\n"+tc.sent); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			res := <-results
			if kindOf(res.err) != tc.kind || (res.err != nil) != (tc.kind != 0) {
				t.Fatalf("error %v, want kind %v", res.err, tc.kind)
			}
			if tc.kind == reqbody.TimedOut && (res.took < timeout || res.took > timeout+5*time.Second || resp.StatusCode != http.StatusRequestTimeout) {
				t.Fatalf("status %d after %v, want 408 just after %v", resp.StatusCode, res.took, timeout)
			}
			if tc.kind == 0 && (res.canceled || resp.StatusCode != http.StatusOK) {
				t.Fatalf("status %d, canceled %v: the body's deadline reached past the body", resp.StatusCode, res.canceled)
			}
		})
	}
}

// deadlineWriter records the read deadlines a handler sets through http.ResponseController.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	set []time.Time
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.set = append(w.set, t)
	return nil
}

// TestReadDeadlineLifecycle: the deadline is set for a body there is to wait for, lifted
// after a whole read (net/http lifts it too when the body hits its end, but not for every
// transport), kept after a failed one, and moved to now for a body abandoned for want of
// inflating room. Abandon does the same for a body not read at all.
func TestReadDeadlineLifecycle(t *testing.T) {
	const timeout = time.Minute
	plain := `{"model":"m"}`
	cases := []struct {
		name, body, encoding string
		declared             int64
		room                 int64
		want                 string // the deadlines set, in order: "later", "now", "none" (lifted)
	}{
		{name: "whole", body: plain, declared: int64(len(plain)), want: "later none"},
		{name: "undeclared", body: plain, declared: -1, want: "later none"},
		{name: "empty", declared: 0, want: ""},
		{name: "cut", body: plain[:4], declared: 100, want: "later"},
		{name: "too_large_declared", body: plain, declared: 1 << 30, want: ""},
		{name: "no_room", body: string(gz(t, []byte(plain), 1)), encoding: "gzip", declared: -1, room: 1 << 10, want: "later now"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			r.ContentLength = tc.declared
			r.Header.Set("Content-Encoding", tc.encoding)
			if tc.declared > int64(len(tc.body)) {
				r.Body = io.NopCloser(cutBody{strings.NewReader(tc.body)})
			}
			start := time.Now()
			_, _ = reqbody.Read(w, r, reqbody.Limits{MaxBytes: 1 << 20, Timeout: timeout, MaxInflating: tc.room, Budget: new(reqbody.Budget)})
			if got := describeDeadlines(w.set, start, timeout); got != tc.want {
				t.Fatalf("deadlines %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("abandon", func(t *testing.T) {
		w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
		start := time.Now()
		reqbody.Abandon(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(plain)))
		reqbody.Abandon(w, httptest.NewRequest(http.MethodPost, "/", nil)) // no body: nothing to abandon
		if got := describeDeadlines(w.set, start, timeout); got != "now" {
			t.Fatalf("deadlines %q, want %q", got, "now")
		}
	})
}

func describeDeadlines(set []time.Time, start time.Time, timeout time.Duration) string {
	var out []string
	for _, d := range set {
		switch {
		case d.IsZero():
			out = append(out, "none")
		case d.Before(start.Add(timeout / 2)):
			out = append(out, "now")
		default:
			out = append(out, "later")
		}
	}
	return strings.Join(out, " ")
}

package relay

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// lockedRecorder lets the keep-alive timer and the test touch one recorder.
type lockedRecorder struct {
	mu sync.Mutex
	*httptest.ResponseRecorder
}

func (r *lockedRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ResponseRecorder.Write(p)
}

func (r *lockedRecorder) WriteString(s string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ResponseRecorder.WriteString(s)
}

func (r *lockedRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ResponseRecorder.Flush()
}

func (r *lockedRecorder) body() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.ResponseRecorder.Body.Bytes())
}

// A route can give its dialect's own keep-alive frame (Anthropic's ping event); it goes out
// whole, between events, in place of the SSE comment.
func TestKeepAliveFramePerRoute(t *testing.T) {
	rec := &lockedRecorder{ResponseRecorder: httptest.NewRecorder()}
	ping := "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	sw := NewWriterFrame(rec, 20*time.Millisecond, ping)
	if err := sw.Write([]byte("event: message_start\ndata: {}\n\n")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return bytes.Count(rec.body(), []byte(ping)) >= 2 }) {
		t.Fatalf("stream %q: fewer than two pings", rec.body())
	}
	sw.Stop()
	got := rec.body()
	if bytes.Contains(got, []byte(KeepAliveComment)) {
		t.Fatalf("stream %q: want ping frames and no comment", got)
	}
	if !bytes.HasPrefix(got, []byte("event: message_start\ndata: {}\n\n")) {
		t.Fatalf("stream %q", got)
	}
	if n := len(rec.body()); n != len(got) {
		t.Fatal("a keep-alive was written after Stop")
	}
}

// brokenClient fails every write: the client left.
type brokenClient struct{ writes int }

func (b *brokenClient) Write([]byte) (int, error) { b.writes++; return 0, errors.New("gone") }
func (b *brokenClient) Flush()                    {}

// The first failed write is remembered: later writes do not reach the connection, and the
// relay learns the client is gone.
func TestWriterStopsAfterAFailedWrite(t *testing.T) {
	for _, every := range []time.Duration{0, time.Hour} {
		b := &brokenClient{}
		sw := NewWriter(b, every)
		if sw.Queue([]byte("data: 1\n\n")) == nil || sw.Write([]byte("data: 2\n\n")) == nil || sw.Err() == nil {
			t.Fatal("a failed write was not reported")
		}
		sw.Stop()
		if b.writes != 1 {
			t.Fatalf("keep-alive %v: %d writes reached a gone client, want 1", every, b.writes)
		}
	}
}

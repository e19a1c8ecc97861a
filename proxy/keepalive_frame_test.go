package proxy

import (
	"bytes"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
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
	c, _ := gin.CreateTestContext(rec)
	ping := []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	sw := newStreamWriterFrame(c.Writer, 20*time.Millisecond, ping)
	if err := sw.write([]byte("event: message_start\ndata: {}\n\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for bytes.Count(rec.body(), ping) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	sw.stop()
	got := rec.body()
	if bytes.Count(got, ping) < 2 || bytes.Contains(got, keepAliveComment) {
		t.Fatalf("stream %q: want ping frames and no comment", got)
	}
	if !bytes.HasPrefix(got, []byte("event: message_start\ndata: {}\n\n")) {
		t.Fatalf("stream %q", got)
	}
}

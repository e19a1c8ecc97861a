package apitest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCanaryFresh(t *testing.T) {
	a, b := Canary(t), Canary(t)
	if a == b || !strings.HasPrefix(a, "sk-CANARY-") || len(a) != len("sk-CANARY-")+24 {
		t.Errorf("canaries %q and %q", a, b)
	}
}

func TestNewRequestHeaders(t *testing.T) {
	// want names every header the test looks at; "" is absent.
	tests := []struct {
		name, key string
		hdr       []string
		want      map[string]string
	}{
		{"bearer_and_json", "k1", nil, map[string]string{"Authorization": "Bearer k1", "Content-Type": "application/json", "X-Test": ""}},
		{"no_key_no_auth", "", nil, map[string]string{"Authorization": "", "Content-Type": "application/json"}},
		{"extra_header", "k1", []string{"X-Test", "v"}, map[string]string{"Authorization": "Bearer k1", "X-Test": "v"}},
		{"extra_overrides_default", "", []string{"Content-Type", "text/plain"}, map[string]string{"Content-Type": "text/plain"}},
		{"odd_pair_ignored", "", []string{"X-Test"}, map[string]string{"Content-Type": "application/json", "X-Test": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := NewRequest(t, context.Background(), "POST", "http://127.0.0.1/x", tt.key, strings.NewReader("{}"), tt.hdr...)
			for name, want := range tt.want {
				if got := req.Header.Get(name); got != want {
					t.Errorf("%s %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("ab"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := len(b.String()); got != 8*100*2 {
		t.Errorf("%d bytes, want %d", got, 8*100*2)
	}
	if b.Held() < uint64(len(b.String())) {
		t.Errorf("held %d is less than the %d bytes written", b.Held(), len(b.String()))
	}
}

const childTestEnv = "MODELGATE_APITEST_CHILD"

// The child's body runs only in the child, and what it prints comes back to the parent.
func TestRunInChild(t *testing.T) {
	inChild, out, err := RunInChild(t, childTestEnv)
	if inChild {
		t.Log("hello from the child")
		return
	}
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "hello from the child") || !strings.Contains(string(out), "PASS") {
		t.Errorf("child output:\n%s", out)
	}
}

// Do sends the request Send is given and hands back status, headers and the whole body.
func TestDoReadsTheWholeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Auth", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write(append([]byte("got "), b...))
	}))
	defer srv.Close()
	status, h, body := Do(t, "POST", srv.URL, "k1", strings.NewReader("hi"))
	if status != http.StatusTeapot || h.Get("X-Auth") != "Bearer k1" || string(body) != "got hi" {
		t.Errorf("status %d, X-Auth %q, body %q", status, h.Get("X-Auth"), body)
	}
}

// RawHTTP sends the bytes it is given and reads the answer; a server that never answers is
// an error once the timeout passes.
func TestRawHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte(r.Method+" "+r.URL.Path+" "), b...))
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	status, body, err := RawHTTP(t, addr, 5*time.Second, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
	if err != nil || status != http.StatusOK || string(body) != "POST /x hi" {
		t.Errorf("status %d body %q err %v", status, body, err)
	}
	// Two of four declared bytes: the server waits for the rest until the deadline ends it.
	if _, _, err := RawHTTP(t, addr, 200*time.Millisecond, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nhi"); err == nil {
		t.Error("an unanswered request returned no error")
	}
}

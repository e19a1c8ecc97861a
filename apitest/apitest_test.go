package apitest

import (
	"context"
	"strings"
	"sync"
	"testing"
)

func TestNewRequestHeaders(t *testing.T) {
	tests := []struct {
		name     string
		key      string
		hdr      []string
		wantAuth string
		wantCT   string
		wantX    string
	}{
		{name: "bearer_and_json", key: "k1", wantAuth: "Bearer k1", wantCT: "application/json"},
		{name: "no_key_no_auth", wantCT: "application/json"},
		{name: "extra_header", key: "k1", hdr: []string{"X-Test", "v"}, wantAuth: "Bearer k1", wantCT: "application/json", wantX: "v"},
		{name: "extra_overrides_default", hdr: []string{"Content-Type", "text/plain"}, wantCT: "text/plain"},
		{name: "odd_pair_ignored", hdr: []string{"X-Test"}, wantCT: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := NewRequest(t, context.Background(), "POST", "http://127.0.0.1/x", tt.key, strings.NewReader("{}"), tt.hdr...)
			if got := req.Header.Get("Authorization"); got != tt.wantAuth {
				t.Errorf("Authorization %q, want %q", got, tt.wantAuth)
			}
			if got := req.Header.Get("Content-Type"); got != tt.wantCT {
				t.Errorf("Content-Type %q, want %q", got, tt.wantCT)
			}
			if got := req.Header.Get("X-Test"); got != tt.wantX {
				t.Errorf("X-Test %q, want %q", got, tt.wantX)
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

func TestCanaryFresh(t *testing.T) {
	a, b := Canary(t), Canary(t)
	if a == b || !strings.HasPrefix(a, "sk-CANARY-") || len(a) != len("sk-CANARY-")+24 {
		t.Errorf("canaries %q and %q", a, b)
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

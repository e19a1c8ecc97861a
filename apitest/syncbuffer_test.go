package apitest

import (
	"sync"
	"testing"
)

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

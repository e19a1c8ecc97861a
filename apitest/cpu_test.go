package apitest

import (
	"crypto/sha256"
	"testing"
	"time"
)

// The process's CPU grows with work done on this goroutine: a reading that stood still (or
// went back) would price every benchmark at nothing.
func TestProcessCPUCountsWork(t *testing.T) {
	before := ProcessCPU(t)
	sum := sha256.Sum256(nil)
	for deadline := time.Now().Add(30 * time.Second); ProcessCPU(t)-before < 10*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("30 s of hashing used %v of CPU, want at least 10ms", ProcessCPU(t)-before)
		}
		for range 1000 {
			sum = sha256.Sum256(sum[:])
		}
	}
}

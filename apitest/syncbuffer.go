package apitest

import (
	"bytes"
	"sync"
)

// SyncBuffer collects output written by concurrent goroutines (handlers' logs, a child
// process's output) while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Held is the memory the buffer itself holds, for tests that measure the heap around it.
func (s *SyncBuffer) Held() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint64(s.b.Cap())
}

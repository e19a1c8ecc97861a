package apitest

import (
	"slices"
	"sync"
)

// Notes is a list of strings that fakes append to from the goroutines that call them (a
// handler, a breaker report, an alert hook) while the test reads it; its zero value is
// ready. Fakes embed it so the lock and the copy on reading are written once.
type Notes struct {
	mu    sync.Mutex
	notes []string
}

// Note appends s.
func (n *Notes) Note(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, s)
}

// Got is a copy of what was noted so far, in order; the caller may keep it while more is
// noted.
func (n *Notes) Got() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.notes)
}

package apitest

import (
	"sync"
	"testing"
)

func TestNotesConcurrentAndCopied(t *testing.T) {
	var n Notes
	if got := n.Got(); len(got) != 0 {
		t.Fatalf("zero Notes holds %q", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				n.Note("x")
				_ = n.Got()
			}
		})
	}
	wg.Wait()
	got := n.Got()
	if len(got) != 8*100 {
		t.Fatalf("%d notes, want %d", len(got), 8*100)
	}
	got[0] = "changed"
	n.Note("last")
	if again := n.Got(); again[0] != "x" || again[len(again)-1] != "last" || len(again) != 8*100+1 {
		t.Errorf("Got shares its slice with the notes or lost one: first %q, last %q, %d notes", again[0], again[len(again)-1], len(again))
	}
}

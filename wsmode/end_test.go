package wsmode

import (
	"sync"
	"testing"
)

// Whichever of the connection's end and the handler's report comes first, the report runs
// once, with the turns the connection served.
func TestEndReportsOnce(t *testing.T) {
	for _, closedFirst := range []bool{true, false} {
		var e End
		var reports []int
		report := func(turns int) { reports = append(reports, turns) }
		if closedFirst {
			e.Closed(3)
			if len(reports) != 0 {
				t.Fatalf("closed first: reported before the handler left its report")
			}
			e.Then(report)
		} else {
			e.Then(report)
			if len(reports) != 0 {
				t.Fatalf("handler first: reported before the connection closed")
			}
			e.Closed(3)
		}
		if len(reports) != 1 || reports[0] != 3 {
			t.Errorf("closed first %v: reports %v, want [3]", closedFirst, reports)
		}
	}
}

// The two goroutines race (run it under -race): exactly one report, whoever wins.
func TestEndRace(t *testing.T) {
	for range 200 {
		var e End
		var mu sync.Mutex
		n := 0
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); e.Closed(1) }()
		go func() {
			defer wg.Done()
			e.Then(func(turns int) { mu.Lock(); n++; mu.Unlock() })
		}()
		wg.Wait()
		if n != 1 {
			t.Fatalf("%d reports, want 1", n)
		}
	}
}

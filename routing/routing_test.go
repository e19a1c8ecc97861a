package routing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// breakers is a test Allower: the named breakers are open; it counts what it was asked.
type breakers struct {
	open  map[string]bool
	asked map[string]int
}

func newBreakers(open ...string) *breakers {
	b := &breakers{open: map[string]bool{}, asked: map[string]int{}}
	for _, o := range open {
		b.open[o] = true
	}
	return b
}

func (b *breakers) Allow(name string) bool {
	b.asked[name]++
	return !b.open[name]
}

func table(weights ...uint64) *Table {
	routes := make([]Route, len(weights))
	for i, w := range weights {
		name := fmt.Sprintf("model-%c", 'a'+i)
		routes[i] = Route{Upstream: name, Breaker: "model:" + name, Weight: w}
	}
	return New(routes)
}

// wantSplit fails t when a route's share of counts is more than tol away from its share of
// the weights (tol in absolute terms: 0.02 is two percentage points).
func wantSplit(t *testing.T, tb *Table, counts []int, calls int, tol float64, skip map[int]bool) {
	t.Helper()
	var total uint64
	for i := range tb.Len() {
		if !skip[i] {
			total += tb.Route(i).Weight
		}
	}
	for i, n := range counts {
		want := 0.0
		if !skip[i] {
			want = float64(tb.Route(i).Weight) / float64(total)
		}
		if got := float64(n) / float64(calls); math.Abs(got-want) > tol {
			t.Errorf("route %d got %.4f of the calls, want %.4f±%.3f (counts %v)", i, got, want, tol, counts)
		}
	}
}

func TestDrawSplitFollowsWeights(t *testing.T) {
	const calls = 10_000
	for _, weights := range [][]uint64{{9, 1}, {3, 1}, {1, 1}, {1, 1, 2}, {50, 30, 15, 5}, {1, 999}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			tb := table(weights...)
			rng := rand.New(rand.NewPCG(uint64(len(weights)), 27))
			counts := make([]int, len(weights))
			for range calls {
				counts[tb.Draw(rng.Uint64(), nil)]++
			}
			wantSplit(t, tb, counts, calls, 0.02, nil)

			// Counting rather than sampling: evenly spaced draws split in exact proportion.
			clear(counts)
			for i := range calls {
				counts[tb.Draw(uint64(i)*(math.MaxUint64/calls), nil)]++
			}
			wantSplit(t, tb, counts, calls, 0.001, nil)
		})
	}
}

func TestStickySplitFollowsWeights(t *testing.T) {
	const users = 10_000
	for _, weights := range [][]uint64{{9, 1}, {3, 1}, {1, 1, 2}, {50, 30, 15, 5}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			tb := table(weights...)
			counts := make([]int, len(weights))
			for u := range users {
				counts[tb.Stick(Key(fmt.Sprintf("user-%d", u)), nil)]++
			}
			wantSplit(t, tb, counts, users, 0.02, nil)
		})
	}
}

func TestStickyUserStaysWhileHealthy(t *testing.T) {
	tb := table(3, 1, 2)
	healthy := newBreakers()
	for u := range 1000 {
		key := Key(fmt.Sprintf("user-%d", u))
		first := tb.Stick(key, healthy)
		for range 20 {
			if got := tb.Stick(key, healthy); got != first {
				t.Fatalf("user-%d moved from route %d to %d while both are healthy", u, first, got)
			}
		}
	}
	// The place follows the route's name, not its position: reordering the list keeps it.
	reordered := New([]Route{tb.Route(2), tb.Route(0), tb.Route(1)})
	for u := range 1000 {
		key := Key(fmt.Sprintf("user-%d", u))
		if a, b := tb.Route(tb.Stick(key, nil)).Upstream, reordered.Route(reordered.Stick(key, nil)).Upstream; a != b {
			t.Fatalf("user-%d is on %s, and on %s once the routes are listed in another order", u, a, b)
		}
	}
}

func TestStickyOnlyUsersOfUnhealthyRouteMove(t *testing.T) {
	const users = 10_000
	tb := table(1, 1, 2)
	before := make([]int, users)
	for u := range users {
		before[u] = tb.Stick(Key(fmt.Sprintf("user-%d", u)), nil)
	}
	sick := newBreakers("model:model-c") // route 2, half of the traffic
	moved := make([]int, tb.Len())
	movers := 0
	for u := range users {
		got := tb.Stick(Key(fmt.Sprintf("user-%d", u)), sick)
		switch {
		case got == 2:
			t.Fatalf("user-%d stays on the unhealthy route", u)
		case before[u] != 2 && got != before[u]:
			t.Fatalf("user-%d moved from healthy route %d to %d", u, before[u], got)
		case before[u] == 2:
			moved[got]++
			movers++
		}
	}
	// The movers spread over the healthy routes by their weights (1:1 here).
	wantSplit(t, tb, moved, movers, 0.02, map[int]bool{2: true})
	// Healthy again: everyone is back where they were.
	for u := range users {
		if got := tb.Stick(Key(fmt.Sprintf("user-%d", u)), newBreakers()); got != before[u] {
			t.Fatalf("user-%d is on route %d once all are healthy, was on %d", u, got, before[u])
		}
	}
}

func TestDrawSkipsUnhealthyRoutes(t *testing.T) {
	const calls = 10_000
	tb := table(1, 1, 2)
	sick := newBreakers("model:model-a")
	rng := rand.New(rand.NewPCG(7, 7))
	counts := make([]int, tb.Len())
	for range calls {
		counts[tb.Draw(rng.Uint64(), sick)]++
	}
	if counts[0] != 0 {
		t.Fatalf("%d calls went to the route whose breaker is open", counts[0])
	}
	wantSplit(t, tb, counts, calls, 0.02, map[int]bool{0: true})
}

// TestChoiceAsksOnlyWhatItReturns: a half-open breaker gives one probe to whoever asks, so
// the choice must ask only about the route it is about to return, and each route at most
// once, whether it draws or sticks.
func TestChoiceAsksOnlyWhatItReturns(t *testing.T) {
	tb := table(1, 1, 1, 1)
	for _, sticky := range []bool{false, true} {
		for i := range 200 {
			cases := []*breakers{newBreakers(), newBreakers("model:model-b", "model:model-c"),
				newBreakers("model:model-a", "model:model-b", "model:model-c", "model:model-d")}
			for _, b := range cases {
				var got int
				if sticky {
					got = tb.Stick(Key(fmt.Sprint(i)), b)
				} else {
					got = tb.Draw(uint64(i)*(math.MaxUint64/200), b)
				}
				for name, n := range b.asked {
					if n > 1 {
						t.Fatalf("sticky=%v: %s asked %d times in one choice", sticky, name, n)
					}
					if name != tb.Route(got).Breaker && !b.open[name] {
						t.Fatalf("sticky=%v: asked healthy %s but chose %s", sticky, name, tb.Route(got).Upstream)
					}
				}
				if len(b.open) == tb.Len() && len(b.asked) != tb.Len() {
					t.Fatalf("sticky=%v: every route is open, yet only %d were asked", sticky, len(b.asked))
				}
			}
		}
	}
}

func TestAllUnhealthyStillChooses(t *testing.T) {
	tb := table(9, 1)
	allOpen := newBreakers("model:model-a", "model:model-b")
	counts := make([]int, 2)
	const calls = 10_000
	for i := range calls {
		counts[tb.Draw(uint64(i)*(math.MaxUint64/calls), allOpen)]++
	}
	// The first draw stands: the split is still the weights'.
	wantSplit(t, tb, counts, calls, 0.001, nil)
	for u := range 100 {
		key := Key(fmt.Sprint(u))
		if a, b := tb.Stick(key, allOpen), tb.Stick(key, nil); a != b {
			t.Fatalf("key %d: %d with every route open, %d when healthy: want its usual route", u, a, b)
		}
	}
}

func TestNewRefusesWhatValidationRefuses(t *testing.T) {
	for name, routes := range map[string][]Route{
		"none":        nil,
		"zero weight": {{Upstream: "a", Weight: 0}},
		"too many":    make([]Route, MaxRoutes+1),
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("want a panic")
				}
			}()
			New(routes)
		})
	}
}

type allowAll struct{}

func (allowAll) Allow(string) bool { return true }

func BenchmarkDraw(b *testing.B) {
	tb := table(9, 1)
	var h Allower = allowAll{}
	b.ReportAllocs()
	r := uint64(1)
	for b.Loop() {
		r = mix(r)
		_ = tb.Draw(r, h)
	}
}

func BenchmarkStick(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprint(n, "routes"), func(b *testing.B) {
			weights := make([]uint64, n)
			for i := range weights {
				weights[i] = uint64(i + 1)
			}
			tb := table(weights...)
			var h Allower = allowAll{}
			b.ReportAllocs()
			key := Key("user-1")
			for b.Loop() {
				key++
				_ = tb.Stick(key, h)
			}
		})
	}
}

func BenchmarkKey(b *testing.B) {
	s := "user_0123456789abcdef_account__session_01234567-89ab-cdef-0123-456789abcdef"
	b.ReportAllocs()
	for b.Loop() {
		_ = Key(s)
	}
}

// FuzzChoice: any routes and any key or draw give a route of the table, the same one every
// time, and one that is healthy whenever a healthy route exists.
func FuzzChoice(f *testing.F) {
	f.Add(uint64(9), uint64(1), uint64(1), uint8(3), uint64(42), uint8(1))
	f.Add(uint64(1), uint64(1_000_000), uint64(7), uint8(2), uint64(0), uint8(0))
	f.Fuzz(func(t *testing.T, w0, w1, w2 uint64, n uint8, key uint64, openMask uint8) {
		n = n%3 + 1
		weights := []uint64{w0%1_000_000 + 1, w1%1_000_000 + 1, w2%1_000_000 + 1}[:n]
		tb := table(weights...)
		var open []string
		for i := range int(n) {
			if openMask&(1<<i) != 0 {
				open = append(open, tb.Route(i).Breaker)
			}
		}
		for _, pick := range []func(*breakers) int{
			func(b *breakers) int { return tb.Draw(key, b) },
			func(b *breakers) int { return tb.Stick(key, b) },
		} {
			b := newBreakers(open...)
			got := pick(b)
			if got < 0 || got >= int(n) {
				t.Fatalf("route %d of %d", got, n)
			}
			if again := pick(newBreakers(open...)); again != got {
				t.Fatalf("the same key chose %d, then %d", got, again)
			}
			if len(open) < int(n) && b.open[tb.Route(got).Breaker] {
				t.Fatalf("chose open route %d while another is healthy", got)
			}
		}
	})
}

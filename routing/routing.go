// Package routing chooses which of a model's weighted routes a call goes to: a weighted draw
// when the model is not sticky, and otherwise a weighted rendezvous (highest random weight)
// choice from a hash of the sticky key, so that a user or a conversation stays on one route
// while that route is healthy and only the keys of an unhealthy route move (the key read
// from a request's fields: sticky.go). It is pure: the caller hands in the random number or
// the key's hash and what the circuit breakers say.
package routing

import (
	"math"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// MaxRoutes is the most routes a Table holds: the choice tracks the routes it has ruled out
// in one 64-bit mask.
const MaxRoutes = 64

// Allower is what the circuit breakers answer: whether the named breaker lets a call
// through now. upstream.Health satisfies it; a nil Allower lets everything through.
//
// Allow may hand out a half-open breaker's one probe, so the choice asks it only about the
// route it is about to return, once per route, never about every route up front.
type Allower interface {
	Allow(name string) bool
}

// Route is one share of a model's traffic.
type Route struct {
	Upstream string // the platform's model name
	Breaker  string // the name of its breaker (upstream.ModelBreaker), worked out once
	Weight   uint64 // positive
}

// Table is a model's routes, ready to choose from. It is read-only once built, so any
// number of requests may choose at once.
type Table struct {
	routes []Route
	total  uint64
	// seeds are each route's hash of its upstream name: a sticky key is mixed with them, so a
	// key's place depends on the route's name, not on its position in the list.
	seeds []uint64
}

// New builds a Table from validated routes: 1 to MaxRoutes of them, each weight positive.
// It panics otherwise, a programming error (config validation refuses such a config).
func New(routes []Route) *Table {
	if len(routes) == 0 || len(routes) > MaxRoutes {
		panic("routing: want 1 to 64 routes")
	}
	t := &Table{routes: append([]Route(nil), routes...), seeds: make([]uint64, len(routes))}
	for i, r := range routes {
		if r.Weight == 0 {
			panic("routing: a route's weight must be positive")
		}
		t.total += r.Weight
		t.seeds[i] = xxhash.Sum64String(r.Upstream)
	}
	return t
}

// Len is how many routes the table holds.
func (t *Table) Len() int { return len(t.routes) }

// Route returns the i-th route.
func (t *Table) Route(i int) Route { return t.routes[i] }

// Key hashes a sticky value (an end user, a conversation) to the key Stick takes. The hash is
// fixed (xxHash64 without a seed), so every replica and every restart places a key on the
// same route.
func Key(s string) uint64 { return xxhash.Sum64String(s) }

// Draw picks a route at random in proportion to the weights, from r, a uniformly random
// number. A route whose breaker refuses the call is ruled out and the draw is repeated
// among the others, in proportion to their weights; when every breaker refuses, the first
// route drawn is returned anyway (a call to a route in doubt beats no call at all).
func (t *Table) Draw(r uint64, h Allower) int {
	var out uint64 // routes ruled out, one bit each
	remaining, first := t.total, -1
	for range t.routes {
		// The high word of r·remaining is uniform over [0, remaining) to within 2^-64 per
		// value, without a division.
		x, _ := bits.Mul64(r, remaining)
		i := t.at(x, out)
		if first < 0 {
			first = i
		}
		if h == nil || h.Allow(t.routes[i].Breaker) {
			return i
		}
		out |= 1 << i
		remaining -= t.routes[i].Weight
		r = mix(r + 0x9e3779b97f4a7c15) // the next draw: r is spent
	}
	return first
}

// at is the route whose share of the weights not ruled out holds x.
func (t *Table) at(x, out uint64) int {
	last := 0
	for i, r := range t.routes {
		if out&(1<<i) != 0 {
			continue
		}
		if x < r.Weight {
			return i
		}
		x -= r.Weight
		last = i
	}
	return last // unreachable while x < the sum of the weights not ruled out
}

// Stick picks the route of a sticky key (Key's hash of it) by weighted rendezvous hashing:
// each route scores the key, the highest score wins, and a route's chance to win is its
// share of the weights. Scores do not depend on the other routes, so when a route's breaker
// refuses the call, only the keys it won move, each to its own next best route, and they
// come back once it is healthy. When every breaker refuses, the best route is returned
// anyway.
func (t *Table) Stick(key uint64, h Allower) int {
	var out uint64
	first := -1
	for range t.routes {
		// Scores are worked out again on each round rather than kept: a second round is
		// rare (a breaker is open), and the first stays free of a table of them.
		best, bestCost, bestWeight := -1, 0.0, 0.0
		for i, r := range t.routes {
			if out&(1<<i) != 0 {
				continue
			}
			// The score is weight/cost; a/b > c/d is compared as a·d > c·b, without dividing.
			c, w := cost(key, t.seeds[i]), float64(r.Weight)
			if best < 0 || w*bestCost > bestWeight*c {
				best, bestCost, bestWeight = i, c, w
			}
		}
		if first < 0 {
			first = best
		}
		if h == nil || h.Allow(t.routes[best].Breaker) {
			return best
		}
		out |= 1 << best
	}
	return first
}

// cost is -ln(u), with u uniform in (0, 1) from the key and the route's seed. A route's
// weighted rendezvous score of the key is weight / cost (an exponential draw whose rate is the
// weight): the largest of these falls on each route with a probability of its weight over
// the sum of the weights.
func cost(key, seed uint64) float64 {
	u := (float64(mix(key^seed)>>11) + 0.5) / (1 << 53) // strictly between 0 and 1
	return -math.Log(u)
}

// mix is SplitMix64's finaliser: every bit of its input moves about half the bits of its
// output, so neighbouring keys and seeds give unrelated scores.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

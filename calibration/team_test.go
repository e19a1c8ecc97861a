package calibration

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"modelgate/apitest"
	"modelgate/store/storetest"
)

// raw is the estimate the team tests reserve for.
const raw = 1000

// moved is how far, as a share, after moves before.
func moved(before, after int64) float64 { return math.Abs(float64(after)/float64(before) - 1) }

// Issue 40: one team's calls, counted by the platform 4 times or a quarter of modelgate's
// estimate, set that team's own figure and move another team's reservation by less than
// 10%, whether it has samples of its own or none.
func TestOneTeamCannotMoveAnother(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reported int64 // what the platform counts of an estimate of 100
		own      float64
	}{
		{"four times", 400, maxRatio},
		{"a quarter", 25, minRatio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := New(nil, nil, nil)
			for range 30 {
				tb.Observe("steady", "m", 100, 110) // a team of its own, with a spread
				tb.Observe("steady", "m", 100, 90)
			}
			// "others" have no samples; "bystander" has samples of another model only.
			tb.Observe("bystander", "other", 100, 100)
			before := map[string]Factor{}
			for _, team := range []string{"steady", "others", "bystander"} {
				before[team] = tb.Factor(team, "m")
			}
			for range 750 {
				tb.Observe("attacker", "m", 100, tc.reported)
			}
			if got := tb.Factor("attacker", "m"); !near(got.Ratio, (750*float64(tc.reported)/100+4)/754) && !near(got.Ratio, tc.own) {
				t.Errorf("the attacker's own figure: %+v, want a ratio near %v", got, tc.own)
			}
			for team, b := range before {
				a := tb.Factor(team, "m")
				t.Logf("%s: before %+v after %+v: reserve %d -> %d, count %d -> %d", team, b, a, b.Reserve(raw), a.Reserve(raw), b.Count(raw), a.Count(raw))
				if m := moved(b.Reserve(raw), a.Reserve(raw)); m >= 0.10 {
					t.Errorf("%s's reservation moved by %.1f%%", team, 100*m)
				}
				if m := moved(b.Count(raw), a.Count(raw)); m >= 0.10 {
					t.Errorf("%s's count moved by %.1f%%", team, 100*m)
				}
			}
		})
	}
}

// Many teams agreeing move the prior a team without samples starts from; a team's own
// samples soon outweigh it.
func TestPriorFromManyTeams(t *testing.T) {
	tb := New(nil, nil, nil)
	for i := range 40 {
		observeTeam(tb, "team-"+strconv.Itoa(i), "m", 50, 100, 150)
	}
	fresh := tb.Factor("fresh", "m")
	// 40 votes at (75+4)/54 each weighted 50/54, against 24 votes at 1.
	u, r := 50.0/54, 79.0/54
	if want := (24 + 40*u*r) / (24 + 40*u); !near(fresh.Ratio, want) || fresh.Samples != 0 || fresh.Spread != 0 {
		t.Errorf("a team without samples: %+v, want ratio %v", fresh, want)
	}
	if fresh.Ratio < 1.25 {
		t.Errorf("40 teams at 1.5 moved the prior only to %v", fresh.Ratio)
	}
	// The pooled figure the admin and metrics views show, and the prior beside it.
	ms := tb.Models()
	if len(ms) != 1 || ms[0].Samples != 40*50 || !near(ms[0].Ratio, (40*75+4)/2004.0) || !near(ms[0].Prior, fresh.Ratio) {
		t.Errorf("Models() = %+v", ms)
	}
	observeTeam(tb, "fresh", "m", 4, 100, 100)
	got := tb.Factor("fresh", "m")
	if want := (4 + 4*fresh.Ratio) / 8; !near(got.Ratio, want) {
		t.Errorf("4 samples of its own at 1: %+v, want ratio %v (half its own, half the prior)", got, want)
	}
}

func observeTeam(tb *Table, team, model string, n int, estimated, reported int64) {
	for range n {
		tb.Observe(team, model, estimated, reported)
	}
}

// Team names are bounded as store keys are: too long or holding the key's separator, a
// team is not calibrated; past MaxTeams a model's new teams read the prior.
func TestTeamsBounded(t *testing.T) {
	tb := New(nil, nil, nil)
	for _, team := range []string{strings.Repeat("t", MaxTeamLen+1), "a|b"} {
		tb.Observe(team, "m", 100, 200)
		if n := len(tb.Models()); n != 0 {
			t.Errorf("team %q calibrated", team)
		}
	}
	for i := range MaxTeams {
		tb.Observe("team-"+strconv.Itoa(i), "m", 100, 100)
	}
	tb.Observe("one-too-many", "m", 100, 400)
	if f := tb.Factor("one-too-many", "m"); f.Samples != 0 || !near(f.Ratio, 1) {
		t.Errorf("a team beyond the bound: %+v", f)
	}
	if f := tb.Factor("team-0", "m"); f.Samples != 1 {
		t.Errorf("a team within the bound: %+v", f)
	}
	tb.mu.RLock()
	n := len(tb.models["m"].teams)
	tb.mu.RUnlock()
	if n != MaxTeams {
		t.Errorf("%d teams kept, want %d", n, MaxTeams)
	}
}

// Replicas share each team's samples through the store, and keep them apart: a replica
// reads every team's figure as the replica that saw its calls does.
func TestReplicasShareTeams(t *testing.T) {
	for _, im := range storetest.Backends() {
		t.Run(im.Name, func(t *testing.T) {
			replica := replicasOn(t, im)
			a, b := replica(), replica()
			observeTeam(a, "x", "m", 30, 100, 200)
			observeTeam(b, "y", "m", 30, 100, 100)
			observeTeam(b, "", "m", 5, 100, 150) // passthrough callers
			apitest.SyncAll(t, a, b, a)
			for _, team := range []string{"x", "y", "", "z"} {
				fa, fb := a.Factor(team, "m"), b.Factor(team, "m")
				if !sameFactor(fa, fb) {
					t.Errorf("team %q: a %+v, b %+v", team, fa, fb)
				}
			}
			if f := b.Factor("x", "m"); f.Samples != 30 || f.Ratio < 1.8 {
				t.Errorf("x on b: %+v", f)
			}
			if f := a.Factor("y", "m"); f.Samples != 30 || moved(1000, f.Count(1000)) >= 0.10 {
				t.Errorf("y on a: %+v", f)
			}
			// A replica started later (or restarted) reads each team's figure.
			c := replica()
			apitest.SyncAll(t, c)
			for _, team := range []string{"x", "y", ""} {
				if fc, fa := c.Factor(team, "m"), a.Factor(team, "m"); !sameFactor(fc, fa) {
					t.Errorf("team %q on a new replica: %+v, want %+v", team, fc, fa)
				}
			}
		})
	}
}

// sameFactor: equal up to the order the teams' votes were summed in.
func sameFactor(a, b Factor) bool {
	return a.Samples == b.Samples && near(a.Ratio, b.Ratio) && near(a.Spread, b.Spread)
}

// The bound holds whatever the other teams have learned: over many mixes of other teams
// (their number, ratios and sample counts drawn from a fixed seed), one team's 750 calls
// at either extreme move a team without samples, and a team with a few, by at most 8%.
func TestPriorBoundWhateverTheOthers(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 4))
	worst := 0.0
	for trial := range 100 {
		for _, reported := range []int64{400, 25} {
			tb := New(nil, nil, nil)
			for i := range rng.IntN(30) {
				observeTeam(tb, "other-"+strconv.Itoa(i), "m", 1+rng.IntN(200), 100, 25+rng.Int64N(376))
			}
			observeTeam(tb, "few", "m", 1+rng.IntN(5), 100, 25+rng.Int64N(376))
			before := map[string]Factor{"none": tb.Factor("none", "m"), "few": tb.Factor("few", "m")}
			observeTeam(tb, "attacker", "m", 750, 100, reported)
			for team, b := range before {
				a := tb.Factor(team, "m")
				m := math.Abs(a.Ratio/b.Ratio - 1)
				worst = max(worst, m)
				if m > 0.08+1e-9 {
					t.Fatalf("trial %d, platform counting %d%%: %s's ratio moved %.2f%% (%v -> %v)", trial, reported, team, 100*m, b.Ratio, a.Ratio)
				}
			}
		}
	}
	t.Logf("the largest move: %.2f%%", 100*worst)
}

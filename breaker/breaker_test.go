package breaker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/testclock"
)

// newClock starts at a whole minute: failure windows are numbered from the clock (so that
// replicas agree), and a test that started in a window's last seconds saw its count reset
// by a cool-down's advance.
func newClock() *testclock.Clock { return testclock.At(testclock.Origin().Truncate(time.Minute)) }

var testSettings = Settings{Failures: 3, Window: time.Minute, Cooldown: 10 * time.Second, MaxCooldown: 30 * time.Second}

// step is one thing done to a breaker and what must follow.
type step struct {
	advance time.Duration
	report  string // "fail", "ok" or "" (none)
	allow   *bool  // when set, Allow must answer this
	state   State
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

func TestStateMachine(t *testing.T) {
	fail3 := []step{{report: "fail", state: Closed}, {report: "fail", state: Closed}, {report: "fail", allow: no(), state: Open}}
	cases := []struct {
		name  string
		steps []step
	}{
		{"closed allows and successes do nothing", []step{
			{allow: yes(), state: Closed}, {report: "ok", allow: yes(), state: Closed}}},
		{"N failures in the window open it", fail3},
		{"failures in different windows do not add up", []step{
			{report: "fail", state: Closed}, {report: "fail", state: Closed},
			{advance: time.Minute, report: "fail", allow: yes(), state: Closed}}},
		{"open until the cool-down ends, then one probe", append(append([]step{}, fail3...),
			step{advance: 9 * time.Second, allow: no(), state: Open},
			step{advance: time.Second, allow: yes(), state: HalfOpen},
			step{allow: no(), state: HalfOpen})},
		{"a successful probe closes it", append(append([]step{}, fail3...),
			step{advance: 10 * time.Second, allow: yes(), state: HalfOpen},
			step{report: "ok", allow: yes(), state: Closed},
			step{report: "fail", allow: yes(), state: Closed})},
		{"a failed probe re-opens it for twice as long", append(append([]step{}, fail3...),
			step{advance: 10 * time.Second, allow: yes(), state: HalfOpen},
			step{report: "fail", allow: no(), state: Open},
			step{advance: 19 * time.Second, allow: no(), state: Open},
			step{advance: time.Second, allow: yes(), state: HalfOpen})},
		{"the doubled cool-down stops at the cap", append(append([]step{}, fail3...),
			step{advance: 10 * time.Second, allow: yes(), state: HalfOpen}, step{report: "fail", state: Open}, // 20s
			step{advance: 20 * time.Second, allow: yes(), state: HalfOpen}, step{report: "fail", state: Open}, // 30s (cap)
			step{advance: 30 * time.Second, allow: yes(), state: HalfOpen})},
		{"a probe that never reports frees the breaker after its lease", append(append([]step{}, fail3...),
			step{advance: 10 * time.Second, allow: yes(), state: HalfOpen},
			step{advance: probeLease - time.Second, allow: no(), state: HalfOpen},
			step{advance: time.Second, allow: yes(), state: HalfOpen})},
		{"late outcomes of calls let through before it opened do not move it", append(append([]step{}, fail3...),
			step{report: "ok", allow: no(), state: Open}, step{report: "fail", allow: no(), state: Open})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			s := New(Options{Settings: testSettings, Now: clk.Now})
			for i, st := range tc.steps {
				clk.Advance(st.advance)
				switch st.report {
				case "fail":
					s.Report("model:m", true)
				case "ok":
					s.Report("model:m", false)
				}
				if st.allow != nil {
					if got := s.Allow("model:m"); got != *st.allow {
						t.Fatalf("step %d: Allow = %v, want %v", i, got, *st.allow)
					}
				}
				if got := stateOf(s, "model:m"); got != st.state {
					t.Fatalf("step %d: state %v, want %v", i, got, st.state)
				}
			}
		})
	}
}

func stateOf(s *Set, name string) State {
	for _, st := range s.Statuses() {
		if st.Name == name {
			return st.Value()
		}
	}
	return Closed
}

func TestOffAndNil(t *testing.T) {
	var nilSet *Set
	if !nilSet.Allow("model:m") || nilSet.Enabled() {
		t.Fatal("a nil set must allow everything")
	}
	nilSet.Report("model:m", true)
	off := New(Options{Settings: Settings{Failures: 0, Window: time.Minute, Cooldown: time.Second}})
	for range 10 {
		off.Report("model:m", true)
	}
	if !off.Allow("model:m") || len(off.Statuses()) != 0 {
		t.Fatal("failures: 0 must turn breakers off")
	}
}

func TestBreakersAreCapped(t *testing.T) {
	s := New(Options{Settings: testSettings})
	for i := range MaxBreakers + 10 {
		s.Report("model:"+time.Duration(i).String(), true)
	}
	if n := len(s.Statuses()); n != MaxBreakers {
		t.Fatalf("%d breakers, want the cap %d", n, MaxBreakers)
	}
	if !s.Allow("model:beyond-the-cap") {
		t.Fatal("a name past the cap must be allowed")
	}
}

// Under load, a half-open breaker lets exactly one call through however many ask at once,
// and that probe's success closes it for all.
func TestOneProbeUnderLoad(t *testing.T) {
	clk := newClock()
	s := New(Options{Settings: testSettings, Now: clk.Now})
	hammer := func() int64 {
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range 100 {
					if s.Allow("key:abcd") {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return allowed.Load()
	}
	for range testSettings.Failures {
		s.Report("key:abcd", true)
	}
	if n := hammer(); n != 0 {
		t.Fatalf("%d calls through an open breaker", n)
	}
	clk.Advance(testSettings.Cooldown)
	if n := hammer(); n != 1 {
		t.Fatalf("%d probes through a half-open breaker, want exactly 1", n)
	}
	s.Report("key:abcd", false)
	if n := hammer(); n != 64*100 {
		t.Fatalf("%d of %d calls through a closed breaker", n, 64*100)
	}
}

func BenchmarkAllowClosed(b *testing.B) {
	s := New(Options{Settings: testSettings})
	s.Report("model:m", true) // the breaker exists
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !s.Allow("model:m") {
				b.Fatal("closed breaker refused")
			}
			s.Report("model:m", false)
		}
	})
}

// An open breaker's window count starts again at 0: its status says what opened it
// instead, the failures that tripped it or a failed probe.
func TestStatusSaysWhatOpenedIt(t *testing.T) {
	clk := newClock()
	s := New(Options{Settings: testSettings, Now: clk.Now})
	status := func() Status {
		for _, st := range s.Statuses() {
			if st.Name == "model:m" {
				return st
			}
		}
		t.Fatal("no status")
		return Status{}
	}
	s.Report("model:m", true)
	if st := status(); st.OpenedBy != "" || st.OpenedAfter != 0 || st.Failures != 1 {
		t.Errorf("closed with one failure: %+v", st)
	}
	s.Report("model:m", true)
	s.Report("model:m", true)
	clk.Advance(time.Minute) // the next window: its count is 0
	if st := status(); st.State != "open" || st.Failures != 0 || st.OpenedBy != OpenedByFailures || st.OpenedAfter != 3 {
		t.Errorf("opened by three failures: %+v", st)
	}
	if !s.Allow("model:m") {
		t.Fatal("no probe after the cool-down")
	}
	s.Report("model:m", true)
	if st := status(); st.State != "open" || st.OpenedBy != OpenedByProbe || st.OpenedAfter != 1 {
		t.Errorf("opened by a failed probe: %+v", st)
	}
}

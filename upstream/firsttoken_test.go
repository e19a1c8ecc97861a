package upstream

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/config"
)

// A stream whose model sends no output event within its first_token_timeout is ended and
// charged as sent without an answer; the chain moves to the next model, the stall counts
// against the stalled model's breaker and output in time for the fallback's. Without a
// fallback the caller gets a 504 first_token_timeout.
func TestChainFirstTokenStall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fallbacks []string
		failure   bool   // the call fails with the stall
		seen      string // the platform models called, in order
		notes     string // the host's
		reports   string // the breakers'
	}{
		{name: "falls_back", fallbacks: []string{"quick"}, seen: "up-reasoner up-quick",
			notes: "abandon reasoner first_token_timeout|hold quick x1 out 64|fell reasoner>quick", reports: "model:up-reasoner=fail model:up-quick=ok"},
		{name: "no_fallback", failure: true, seen: "up-reasoner", reports: "model:up-reasoner=fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			models := []config.Model{
				// The stall is waited out on the real clock: short enough for a unit test, long
				// enough for a loaded machine to have written the request by then (a stall
				// before that would be charged nothing). The platform holds the stream until
				// the chain gives up on it, so no load makes it answer.
				{ID: "reasoner", Upstream: "up-reasoner", FirstTokenTimeout: 250 * time.Millisecond, Fallbacks: tc.fallbacks},
				// Generous: its output comes at once however loaded the machine.
				{ID: "quick", Upstream: "up-quick", FirstTokenTimeout: time.Minute},
			}
			health := &fakeHealth{blocked: map[string]bool{}}
			g, up := newChainGateway(t, models, health, map[string][]string{"up-reasoner": {"stall"}})
			host := &fakeHost{}
			c := startChain(g, host, nil, &auth.Principal{Team: "alpha"}, "reasoner", true, 1)
			resp, cancel, f := c.Open(t.Context())
			if tc.failure {
				if f == nil || f.Status != 504 || f.Kind != KindFirstTokenTimeout || !f.MaybeBilled {
					t.Fatalf("failure %+v, want a billed 504 first_token_timeout", f)
				}
				if ch := f.Charge(c.reserved); ch.Unknown != accounting.NoAnswer || ch.Usage != c.reserved {
					t.Errorf("charged %+v, want its reservation, no_answer", ch)
				}
			} else {
				if f != nil {
					t.Fatalf("failure %d %s, want the fallback's stream", f.Status, f.Body)
				}
				// The events read while waiting for output are handed on whole.
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				if err != nil || !strings.HasPrefix(string(b), "event: response.created\n") || !strings.Contains(string(b), "response.completed") {
					t.Fatalf("stream %q (%v), want it from its first byte", b, err)
				}
			}
			if got := strings.Join(host.notes.Got(), "|"); got != tc.notes {
				t.Errorf("host notes %q, want %q", got, tc.notes)
			}
			if got := strings.Join(health.got(), " "); got != tc.reports {
				t.Errorf("breaker reports %q, want %q", got, tc.reports)
			}
			if got := strings.Join(up.models(), " "); got != tc.seen {
				t.Errorf("platform called for %s, want %s", got, tc.seen)
			}
		})
	}
}

// Chat's n>1 choices fall back together through Attempt and FallBack alone: each choice is
// an attempt of its own on the chain's current model, and one FallBack moves them all, its
// hold covering every choice.
func TestChainFanOut(t *testing.T) {
	g, up := newChainGateway(t, chainModels, nil, map[string][]string{"up-big": {"503"}})
	host := &fakeHost{}
	c := startChain(g, host, nil, &auth.Principal{Team: "alpha"}, "big", false, 2)
	attempts := make([]int, 2)
	var failed *Failure
	for round := 0; ; round++ {
		if round > 2 {
			t.Fatal("still failing after two fallbacks")
		}
		fails := make([]*Failure, 2)
		done := make(chan int, 2)
		for i := range fails {
			go func() {
				tr := Trail{Attempts: &attempts[i]}
				resp, cancel, f := c.Attempt(t.Context(), &tr)
				if f == nil {
					resp.Body.Close()
					cancel()
				}
				fails[i] = f
				done <- i
			}()
		}
		<-done
		<-done
		failed = nil
		for _, f := range fails {
			if f != nil {
				failed = f
			}
		}
		if failed == nil || !c.FallBack(failed, accounting.Charge{}) {
			break
		}
	}
	if failed != nil {
		t.Fatalf("failure %d %s, want both choices answered by small", failed.Status, failed.Body)
	}
	got := up.models()
	slices.Sort(got)
	if want := []string{"up-big", "up-big", "up-small", "up-small"}; !slices.Equal(got, want) {
		t.Errorf("platform called for %v, want both choices on big, then both on small", got)
	}
	if got, want := strings.Join(host.notes.Got(), "|"), "abandon big status_5xx|hold small x2 out 64|fell big>small"; got != want {
		t.Errorf("host notes %q, want %q", got, want)
	}
}

package tests

import (
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/redisconn/redistest"
)

// crashStreams is how many streams the killed process holds: the team's whole concurrency.
const crashStreams = 4

// TestCrashChargesOpenStreams (issue 41): a modelgate killed (SIGKILL) holding streams, then
// started again on the same data path, charges them at once: within 5 s the team's usage in
// /admin/usage is at least what the platform billed for them, each has an access log line
// with outcome crashed, and the team's concurrency slots are free, on the embedded store
// and on Redis. Without the admission journal the usage is lost and, on Redis, the slots
// stay taken until their leases expire (30 s).
func TestCrashChargesOpenStreams(t *testing.T) {
	for _, kind := range []string{"embedded", "redis"} {
		t.Run(kind, func(t *testing.T) {
			p := startPlatform(t)
			rl := "  data_path: " + t.TempDir() + "\n"
			if kind == "redis" {
				rl += "  store: redis://" + redistest.Start(t).Addr + "/0\n"
			}
			cfg := gatewayYAML{
				models:    "  - id: sim-slow\n",
				ratelimit: rl,
				teams:     alphaTeam("{concurrent_requests: " + strconv.Itoa(crashStreams) + "}"),
				more:      adminKeys,
			}.render(p)
			opts := gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)}

			first := startGateway(t, opts)
			url := first.URL + "/v1/chat/completions"
			body := chatBody("sim-slow", slowPrompt, true)
			var open []*openStream
			for range crashStreams {
				s := startStream(t, url, alphaKey, body)
				if s.status != http.StatusOK {
					t.Fatalf("stream before the kill: status %d", s.status)
				}
				open = append(open, s)
			}
			for _, s := range open {
				s.waitStarted(t)
			}
			// Killed mid-answer: the platform has billed output too.
			deadline := time.Now().Add(30 * time.Second)
			for p.Sim.Totals(p.Key).OutputTokens < 4*crashStreams {
				if time.Now().After(deadline) {
					t.Fatalf("the platform billed %+v; the streams sent no output", p.Sim.Totals(p.Key))
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, s := range open {
				s.stillOpen(t, "the kill")
			}
			first.Signal(t, syscall.SIGKILL)
			first.Wait(t, 30*time.Second)
			// The platform has seen every call end once it noted each cancellation; what it
			// billed for them can only have grown until then.
			deadline = time.Now().Add(30 * time.Second)
			for len(p.Sim.Cancellations()) < crashStreams {
				if time.Now().After(deadline) {
					t.Fatalf("the platform noted %d of %d calls cut", len(p.Sim.Cancellations()), crashStreams)
				}
				time.Sleep(10 * time.Millisecond)
			}
			billed := p.Sim.Totals(p.Key)
			if billed.InputTokens+billed.OutputTokens == 0 {
				t.Fatal("the platform billed nothing: the test would prove nothing")
			}

			second := startGateway(t, opts)
			healthy := time.Now()
			in, out := teamDayTokens(t, second, "alpha")
			if took := time.Since(healthy); took > 5*time.Second {
				t.Errorf("usage read %v after the restart, want within 5s", took)
			}
			if in < billed.InputTokens || out < billed.OutputTokens {
				t.Errorf("after the restart team alpha used %d in / %d out; the platform billed %d / %d",
					in, out, billed.InputTokens, billed.OutputTokens)
			}
			code, hist := opsMust(t, "GET", second.URL+"/admin/usage/history?group_by=team", adminKey, "")
			row := gjson.Get(hist, `rows.#(team=="alpha")`)
			if code != http.StatusOK || row.Get("input_tokens").Int() < billed.InputTokens || row.Get("output_tokens").Int() < billed.OutputTokens {
				t.Errorf("usage history after the restart: %d %s; the platform billed %d / %d", code, hist, billed.InputTokens, billed.OutputTokens)
			}
			t.Logf("platform billed %d in / %d out; charged after the restart %d / %d", billed.InputTokens, billed.OutputTokens, in, out)
			var crashed []string
			for _, line := range strings.Split(second.Output.String(), "\n") {
				if strings.Contains(line, "outcome=crashed") {
					crashed = append(crashed, line)
				}
			}
			if len(crashed) != crashStreams {
				t.Errorf("%d access log lines with outcome=crashed, want %d", len(crashed), crashStreams)
			}
			for _, line := range crashed {
				for _, want := range []string{"msg=request ", "route=/v1/chat/completions", "team=alpha", "key=alpha-1", "model=sim-slow", "usage_estimated=crashed"} {
					if !strings.Contains(line, want) {
						t.Errorf("crashed call's line lacks %q: %s", want, line)
					}
				}
			}

			// Every slot is free at once: the team opens its whole concurrency again, and one
			// more is refused, so the limit is still in force.
			url = second.URL + "/v1/chat/completions"
			var again []*openStream
			for i := range crashStreams {
				s := startStream(t, url, alphaKey, body)
				if s.status != http.StatusOK {
					t.Fatalf("stream %d after the restart: status %d, want 200 (slots still held)", i, s.status)
				}
				again = append(again, s)
			}
			if code, _, _, _ := opsDo(t, "POST", url, alphaKey, body); code != http.StatusTooManyRequests {
				t.Errorf("a stream past the team's concurrency: status %d, want 429", code)
			}
			for _, s := range again {
				s.wait(t)
			}
		})
	}
}

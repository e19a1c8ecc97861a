package proxy

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/tokens"
)

// attackMark marks the requests the test platform counts its own way: text whose tokens
// modelgate's estimate misjudges (dense symbols, say), which one team can send at will.
const attackMark = "ZZ-DENSE-ZZ"

// markedCounter counts a marked request's input as factor times modelgate's estimate, and
// every other request as estimated.
type markedCounter struct{ factor float64 }

func (m markedCounter) Count(_ string, body []byte) int64 {
	n := tokens.EstimateResponsesInput(body)
	if bytes.Contains(body, []byte(attackMark)) {
		return int64(math.Round(float64(n) * m.factor))
	}
	return n
}

// teamsCalibrationYAML: alpha is the team that sends the marked calls, beta a team with
// calls of its own, gamma a team with none.
const teamsCalibrationYAML = apitest.SimUpstreamYAML + `models:
  - id: sim-chat
teams:
  - name: alpha
    keys: [{name: alpha-1, key: mg-alpha-key-1}]
  - name: beta
    keys: [{name: beta-1, key: mg-beta-key-1}]
  - name: gamma
    keys: [{name: gamma-1, key: mg-gamma-key-1}]
admin_keys: [mg-admin-key]
`

// Issue 40: 750 calls of one team, which the platform counts 4 times or a quarter of
// modelgate's estimate, teach that team its own ratio and move another team's input
// reservation and count_tokens by less than 10%, whether that team has calls of its own
// or none.
func TestOneTeamCannotMoveAnothersEstimates(t *testing.T) {
	probe := []byte(`{"model":"sim-chat","max_output_tokens":16,"input":"` + calibrationProse(3, 12) + `"}`)
	reserve := func(t *testing.T, env *testEnv, key, id string) int64 {
		t.Helper()
		if status, _, b := env.do(t, "POST", "/v1/responses", key, probe, "X-Request-Id", id); status != 200 {
			t.Fatalf("%s: %d %s", id, status, b)
		}
		r, _ := reservedAndBilled(t, env, id)
		return r
	}
	counted := func(t *testing.T, env *testEnv, key string) int64 {
		t.Helper()
		body := []byte(`{"model":"sim-chat","max_tokens":16,"messages":[{"role":"user","content":"` + calibrationProse(3, 12) + `"}]}`)
		status, _, b := env.do(t, "POST", "/v1/messages/count_tokens", key, body, "anthropic-version", "2023-06-01")
		if status != 200 {
			t.Fatalf("count_tokens: %d %s", status, b)
		}
		var n int64
		if _, err := fmt.Sscanf(string(b), `{"input_tokens":%d}`, &n); err != nil {
			t.Fatalf("count_tokens answered %s", b)
		}
		return n
	}
	moved := func(before, after int64) float64 { return math.Abs(float64(after)/float64(before) - 1) }

	for _, tc := range []struct {
		name   string
		factor float64
	}{
		{"counted four times", 4},
		{"counted a quarter", 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := startEnv(t, envOptions{yaml: teamsCalibrationYAML, simCounter: markedCounter{tc.factor}})
			raw := reserve(t, env, keyBeta, "uncalibrated") // nobody has samples yet
			for i := range 20 {
				reserve(t, env, keyBeta, fmt.Sprintf("beta-own-%d", i))
			}
			betaBefore := reserve(t, env, keyBeta, "beta-before")
			countBefore := counted(t, env, keyGamma)

			// alpha's 750 calls, four at a time.
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := w; i < 750; i += 4 {
						body := fmt.Sprintf(`{"model":"sim-chat","max_output_tokens":4,"input":"%s %d %s"}`, attackMark, i, strings.Repeat("x", 40))
						if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body)); status != 200 {
							t.Errorf("alpha's call %d: %d %s", i, status, b)
							return
						}
					}
				})
			}
			wg.Wait()
			if !waitFor(10*time.Second, func() bool { return env.server.calibration.Factor("alpha", "sim-chat").Samples >= 750 }) {
				t.Fatalf("alpha's samples: %+v", env.server.calibration.Factor("alpha", "sim-chat"))
			}

			betaAfter := reserve(t, env, keyBeta, "beta-after")
			gammaAfter := reserve(t, env, keyGamma, "gamma-after")
			countAfter := counted(t, env, keyGamma)
			alphaAfter := reserve(t, env, keyAlpha1, "alpha-after")
			t.Logf("input reservations of one request: uncalibrated %d; beta %d -> %d; gamma (no samples) %d; alpha itself %d; gamma's count_tokens %d -> %d",
				raw, betaBefore, betaAfter, gammaAfter, alphaAfter, countBefore, countAfter)
			if m := moved(betaBefore, betaAfter); m >= 0.10 {
				t.Errorf("beta's reservation moved by %.1f%%", 100*m)
			}
			if m := moved(raw, gammaAfter); m >= 0.10 {
				t.Errorf("gamma's reservation moved by %.1f%% from the uncalibrated one", 100*m)
			}
			if m := moved(countBefore, countAfter); m >= 0.10 {
				t.Errorf("gamma's count_tokens moved by %.1f%%", 100*m)
			}
			// alpha's own figure did move: the calls were learned, by alpha.
			if m := moved(raw, alphaAfter); m < 0.4 {
				t.Errorf("alpha's own reservation moved by only %.1f%%: its calls were not learned", 100*m)
			}
		})
	}
}

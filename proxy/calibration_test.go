package proxy

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"modelgate/platformsim"
)

// calibrationDensity is how many more tokens the test's platform counts than modelgate's
// rules would for the same text: a model with a smaller vocabulary.
const calibrationDensity = 1.25

// reservedAndBilled is the input reservation of the request sent with X-Request-Id id (its
// access log line, where id is the client_request_id) and the input the platform billed for
// it (under modelgate's own id, the line's request_id).
func reservedAndBilled(t *testing.T, env *testEnv, id string) (reserved, billed int64) {
	t.Helper()
	var ours string
	found := waitFor(5*time.Second, func() bool {
		reserved = -1
		for line := range strings.SplitSeq(env.logs.String(), "\n") {
			var r struct {
				Msg       string `json:"msg"`
				RequestID string `json:"request_id"`
				ClientID  string `json:"client_request_id"`
				Reserved  int64  `json:"input_reserved"`
			}
			if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "request" && r.ClientID == id {
				reserved, ours = r.Reserved, r.RequestID
			}
		}
		return reserved >= 0
	})
	if !found {
		t.Fatalf("%s: no access log line", id)
	}
	return reserved, env.sim.BilledFor(ours).InputTokens
}

// send posts a shape's request under id and fails unless it is answered.
func sendShape(t *testing.T, env *testEnv, route string, body []byte, id string) {
	t.Helper()
	if status, _, b := env.do(t, "POST", route, keyAlpha1, body, "X-Request-Id", id); status != 200 {
		t.Fatalf("%s %s: %d %s", id, route, status, b)
	}
}

// countTokens asks count_tokens about a Messages body.
func countTokens(t *testing.T, env *testEnv, body []byte) int64 {
	t.Helper()
	status, _, b := env.do(t, "POST", "/v1/messages/count_tokens", keyAlpha1, body, "anthropic-version", "2023-06-01")
	if status != 200 {
		t.Fatalf("count_tokens: %d %s", status, b)
	}
	var r struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.InputTokens
}

func offBy(got, want int64) float64 { return float64(got)/float64(want) - 1 }

// The figure: on a platform whose tokenizer counts differently, 50 requests of varied
// shapes teach modelgate the model's ratio. Before, a text request's reservation is within
// ±35% of what the platform reports; after, count_tokens and the input reservation of new
// requests of every shape are within ±10%.
func TestCalibrationLearnsThePlatformsCount(t *testing.T) {
	env := startEnv(t, envOptions{simCounter: platformsim.PieceCounter{Density: map[string]float64{"sim-chat": calibrationDensity}}})
	shapes := calibrationShapes()

	for _, sh := range shapes {
		id := "before-" + sh.name
		sendShape(t, env, sh.route, sh.body(0), id)
		reserved, billed := reservedAndBilled(t, env, id)
		t.Logf("before %-16s reserved %5d billed %5d (%+.1f%%)", sh.name, reserved, billed, 100*offBy(reserved, billed))
		if sh.text && math.Abs(offBy(reserved, billed)) > 0.35 {
			t.Errorf("before calibration, %s reserved %d for %d billed: off by more than 35%%", sh.name, reserved, billed)
		}
	}

	for i := range 50 {
		sh := shapes[i%len(shapes)]
		body, route := sh.body(1+i), sh.route
		if i%2 == 1 { // half of them through the Messages route
			body, route = sh.messages(1+i), "/v1/messages"
		}
		sendShape(t, env, route, body, fmt.Sprintf("learn-%d", i))
	}
	// The last answer's settlement may still be running when its client has it.
	waitFor(5*time.Second, func() bool { return env.server.calibration.Factor("alpha", calibrationModel).Samples >= 55 })
	f := env.server.calibration.Factor("alpha", calibrationModel)
	t.Logf("learned: ratio %.3f, spread %.3f, %d samples", f.Ratio, f.Spread, f.Samples)

	for _, sh := range shapes {
		v := 100 + len(sh.name)
		id := "after-" + sh.name
		sendShape(t, env, sh.route, sh.body(v), id)
		reserved, billed := reservedAndBilled(t, env, id)

		msgs := sh.messages(v)
		counted := countTokens(t, env, msgs)
		mid := "after-count-" + sh.name
		sendShape(t, env, "/v1/messages", msgs, mid)
		_, msgBilled := reservedAndBilled(t, env, mid)

		t.Logf("after  %-16s reserved %5d billed %5d (%+.1f%%); count_tokens %5d billed %5d (%+.1f%%)", sh.name,
			reserved, billed, 100*offBy(reserved, billed), counted, msgBilled, 100*offBy(counted, msgBilled))
		if math.Abs(offBy(reserved, billed)) > 0.10 {
			t.Errorf("after calibration, %s reserved %d for %d billed: off by more than 10%%", sh.name, reserved, billed)
		}
		if math.Abs(offBy(counted, msgBilled)) > 0.10 {
			t.Errorf("after calibration, count_tokens says %d for %s, the platform billed %d: off by more than 10%%", counted, sh.name, msgBilled)
		}
	}
}

package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/platformsim"
	"modelgate/tokens"
)

// budgetChat is a chat of many short turns, max_tokens 16: the kind of request whose JSON
// is several times its text, which the old estimate (a quarter of the JSON's bytes) counted.
func budgetChat() []byte {
	var msgs []string
	for i := range 60 {
		role := []string{"user", "assistant"}[i%2]
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"ok %d"}`, role, i))
	}
	return []byte(`{"model":"sim-chat","max_tokens":16,"messages":[` + strings.Join(msgs, ",") + `]}`)
}

// oldEstimate is the estimate before issue 26: the raw JSON of instructions and input over 4.
func oldEstimate(upstream []byte) int64 {
	r := gjson.GetManyBytes(upstream, "instructions", "input")
	return tokens.EstimateString(r[0].Raw) + tokens.EstimateString(r[1].Raw)
}

// budgetYAML prices sim-chat at ${PRICE} per million tokens, in and out, and gives team
// alpha a daily spend budget of 0.10.
const budgetYAML = apitest.SimUpstreamYAML + `models:
  - id: sim-chat
    price: {input: ${PRICE}, output: ${PRICE}}
teams:
  - name: alpha
    limits: {spend_per_day: 0.10}
    keys:
      - {name: alpha-1, key: mg-alpha-key-1}
admin_keys: [mg-admin-key]
`

// The false refusal: with 0.10 a day, 0.034 spent and a call that costs 0.034, the
// call must be admitted; the old estimate held about three times its cost and refused it.
// Spending on, the budget is never overrun by more than one call's estimate error, also on
// a platform that counts more tokens than modelgate estimates.
func TestBudgetAdmitsWhatItCanAfford(t *testing.T) {
	// A dry run learns what the call costs in tokens, to price it at 0.034.
	dry := startEnv(t, envOptions{})
	if status, _, b := dry.do(t, "POST", "/v1/chat/completions", keyAlpha1, budgetChat()); status != 200 {
		t.Fatalf("dry run: %d %s", status, b)
	}
	up := dry.sim.Requests()[0].Body
	input := tokens.EstimateResponsesInput(up)
	const callMicros, budgetMicros = 34_000, 100_000
	price := float64(callMicros) / float64(input+16) // per million tokens = micros per token
	if old := float64(oldEstimate(up)+16) * price; old <= budgetMicros-callMicros {
		t.Fatalf("the old estimate held %.0f micros, which fits: the request does not show the false refusal", old)
	} else {
		t.Logf("input %d tokens (old estimate %d); price %.2f/M; the old hold was %.0f micros against %d left",
			input, oldEstimate(up), price, old, budgetMicros-callMicros)
	}

	for _, tc := range []struct {
		name    string
		counter platformsim.InputCounter
	}{
		{"platform_counts_as_estimated", nil},
		{"platform_counts_25pc_more", platformsim.PieceCounter{Density: map[string]float64{"sim-chat": 1.25}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ledger := memoryLedger(t)
			env := startEnv(t, envOptions{yaml: budgetYAML, vars: map[string]string{"PRICE": fmt.Sprint(price)},
				ledger: ledger, simCounter: tc.counter})
			var admitted int
			var worstError float64 // the most one call cost beyond what it held, in micros
			for i := range 10 {
				id := fmt.Sprintf("budget-%d", i)
				status, _, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, budgetChat(), "X-Request-Id", id)
				if status == 429 {
					if code := gjson.GetBytes(b, "error.code").Str; code != "insufficient_quota" {
						t.Fatalf("call %d refused with %s", i, b)
					}
					break
				}
				if status != 200 {
					t.Fatalf("call %d: %d %s", i, status, b)
				}
				admitted++
				reserved, billed := reservedAndBilled(t, env, id)
				worstError = max(worstError, float64(billed-reserved)*price)
			}
			day, _ := ledger.Spent("team:alpha")
			spent := day * 1e6
			t.Logf("%d calls admitted, %.0f micros spent of %d; worst estimate error %.0f micros", admitted, spent, budgetMicros, worstError)
			if tc.counter == nil && admitted < 2 {
				t.Errorf("only %d calls of 0.034 admitted within 0.10: the second was refused with 0.066 left", admitted)
			}
			if spent > budgetMicros+worstError+1 {
				t.Errorf("spent %.0f micros of a %d budget: overrun by more than one call's estimate error (%.0f)", spent, budgetMicros, worstError)
			}
			if admitted == 10 {
				t.Errorf("10 calls of about 0.034 all admitted within 0.10")
			}
		})
	}
}

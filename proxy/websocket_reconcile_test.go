package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/billing"
	"modelgate/platformsim"
	"modelgate/store"
	"modelgate/testclock"
	"modelgate/tokens"
)

// Limits, spend and accounting over the Responses WebSocket, reconciled with the simulated
// platform's bill as TestReconcileMixedRunWithThePlatformsBill does over HTTP: each turn is
// one request, settled once by docs/accounting.md's rules.

// socketTurnLine is one WebSocket turn as modelgate's access log says it was charged.
type socketTurnLine struct {
	RequestID string `json:"request_id"`
	Team      string `json:"team"`
	Model     string `json:"model"`
	Status    int    `json:"status"`
	Input     int64  `json:"input_tokens"`
	Output    int64  `json:"output_tokens"`
	Estimated string `json:"usage_estimated"`
}

// socketTurnLines are the access log's WebSocket turns, in the order they ended.
func socketTurnLines(logs string) []socketTurnLine {
	var out []socketTurnLine
	for line := range strings.SplitSeq(logs, "\n") {
		var r struct {
			Msg       string `json:"msg"`
			Transport string `json:"transport"`
			socketTurnLine
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "request" && r.Transport == "websocket" {
			out = append(out, r.socketTurnLine)
		}
	}
	return out
}

func TestSocketReconcileWithThePlatformsBill(t *testing.T) {
	offset := testclock.SameDay(testclock.Origin(), time.Minute).Sub(time.Now())
	clock := func() time.Time { return time.Now().Add(offset) }
	ledger, _ := billing.NewLedger(context.Background(), nil, clock, nil)
	history := billing.NewRecorder(nil, 0, clock, nil)
	env := newResEnv(t, envOptions{yaml: reconcileYAML, now: clock, limiterNow: clock, simKeys: []string{"sk-reconcile-alpha", "sk-reconcile-beta"},
		store: tempBolt(t, store.BoltOptions{}), ledger: ledger, history: history})

	// Team alpha: plain, chained twice (store: false, then a stored one), refused by the
	// platform, refused before admission, cut by the platform's error event.
	alpha := dialSocket(t, env.testEnv, keyAlpha1)
	const capOut = `"max_output_tokens":256`
	r1 := completedResponse(t, turnEvents(t, alpha, `{"type":"response.create","model":"sim-chat",`+capOut+`,"store":false,"input":"plain turn"}`))
	r2 := completedResponse(t, turnEvents(t, alpha, `{"type":"response.create","model":"sim-chat",`+capOut+`,"store":false,"previous_response_id":"`+r1.Get("id").Str+`","input":"chained"}`))
	completedResponse(t, turnEvents(t, alpha, `{"type":"response.create","model":"sim-chat",`+capOut+`,"previous_response_id":"`+r2.Get("id").Str+`","input":"chained and stored"}`))
	for _, refused := range []string{
		`{"type":"response.create","model":"sim-429",` + capOut + `,"input":"refused by the platform"}`,
		`{"type":"response.create","model":"sim-chat",` + capOut + `,"store":false,"previous_response_id":"resp_gone","input":"refused here"}`,
	} {
		ev := turnEvents(t, alpha, refused)
		if gjson.Get(ev[len(ev)-1], "type").Str != "error" {
			t.Fatalf("%s: ended with %s", refused, ev[len(ev)-1])
		}
	}
	ev := turnEvents(t, alpha, `{"type":"response.create","model":"sim-error-event",`+capOut+`,"input":"cut by the platform"}`)
	if gjson.Get(ev[len(ev)-1], "type").Str != "error" {
		t.Fatalf("the platform's error event: ended with %s", ev[len(ev)-1])
	}

	// Team beta: a plain turn, then one its client leaves after four deltas.
	beta := dialSocket(t, env.testEnv, keyBeta)
	completedResponse(t, turnEvents(t, beta, `{"type":"response.create","model":"sim-chat",`+capOut+`,"input":"beta's turn"}`))
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 8})
	send(t, beta, `{"type":"response.create","model":"sim-chat",`+capOut+`,"input":"beta leaves"}`)
	deltas := 0
	for deltas < 4 {
		if gjson.Get(nextFrame(t, beta), "type").Str == "response.output_text.delta" {
			deltas++
		}
	}
	beta.CloseNow()

	const turns = 8
	var lines []socketTurnLine
	if !waitFor(10*time.Second, func() bool {
		lines = socketTurnLines(env.logs.String())
		return len(lines) == turns && env.limiter.Open() == 0
	}) {
		t.Fatalf("%d turns logged (want %d), %d tickets open", len(lines), turns, env.limiter.Open())
	}

	// Each turn: charged the platform's bill for its request id, or, where the platform did
	// not say, the bound docs/accounting.md gives.
	margins := map[string]platformsim.Totals{}
	billedTurns := 0
	for _, l := range lines {
		billed := env.sim.BilledFor(l.RequestID)
		var mIn, mOut int64
		switch l.Estimated {
		case "":
		case accounting.EarlyEnd: // the client left: what was read plus 16 output tokens
			mIn, mOut = inputEstimateOf(t, env.sim, l.RequestID)-billed.InputTokens, min(16, reconcileCap-billed.OutputTokens)
		case accounting.StreamCut: // the platform's error event: the reservation
			mIn, mOut = inputEstimateOf(t, env.sim, l.RequestID)-billed.InputTokens, reconcileCap-billed.OutputTokens
		default:
			t.Errorf("%s: settled %q, a case this run does not make", l.RequestID, l.Estimated)
		}
		t.Logf("%-36s %-16s %-14s status %d charged in=%-4d out=%-4d billed in=%-4d out=%-4d (%d calls)",
			l.RequestID, l.Model, l.Estimated, l.Status, l.Input, l.Output, billed.InputTokens, billed.OutputTokens, billed.Requests)
		if l.Input-billed.InputTokens != mIn || l.Output-billed.OutputTokens != mOut {
			t.Errorf("%s (%q): charged in=%d out=%d, billed in=%d out=%d: margin in=%d out=%d, docs/accounting.md gives in=%d out=%d",
				l.RequestID, l.Estimated, l.Input, l.Output, billed.InputTokens, billed.OutputTokens, l.Input-billed.InputTokens, l.Output-billed.OutputTokens, mIn, mOut)
		}
		if billed.Requests > 0 {
			billedTurns++
		}
		m := margins[l.Team]
		m.InputTokens += mIn
		m.OutputTokens += mOut
		margins[l.Team] = m
	}
	if billedTurns != 6 { // all but the two refused turns
		t.Errorf("the platform billed %d turns, want 6", billedTurns)
	}
	wantEstimated := map[string]int{"": 6, accounting.EarlyEnd: 1, accounting.StreamCut: 1}
	for _, l := range lines {
		wantEstimated[l.Estimated]--
	}
	for k, n := range wantEstimated {
		if n != 0 {
			t.Errorf("usage_estimated %q: %d turns more than expected", k, -n)
		}
	}

	// The day totals: every book equals the platform's bill for the team's key plus margins.
	bills := map[string]platformsim.Totals{}
	for _, tm := range reconcileTeams {
		bills[tm.name] = env.sim.Totals(tm.platformKey)
	}
	var problems []string
	if !waitFor(5*time.Second, func() bool {
		problems = checkTeamBooks(t, env, ledger, history, clock(), bills, margins)
		return len(problems) == 0
	}) {
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// inputEstimateOf is modelgate's input estimate of the platform call that carried the request
// id: the body as the platform received it (the expanded chain, for a continued turn).
func inputEstimateOf(t *testing.T, sim *platformsim.Sim, requestID string) int64 {
	t.Helper()
	for _, r := range sim.Requests() {
		if r.Path == "/v1/responses" && r.Header.Get("X-Request-Id") == requestID {
			return tokens.EstimateResponsesInput(r.Body)
		}
	}
	t.Fatalf("no platform call carried %s", requestID)
	return 0
}

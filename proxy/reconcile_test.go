package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/billing"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/store"
	"modelgate/testclock"
	"modelgate/tokens"
)

// reconcileYAML: two teams, each with its own platform key, so the platform's bill is per
// team; every model priced at 1 per 1M input tokens and 2 per 1M output tokens, so a
// request's spend in micro-units is its input plus twice its output, exactly.
const reconcileYAML = apitest.SimUpstreamYAML + `models:
  - id: sim-chat
    price: {input: 1.0, output: 2.0}
  - id: sim-429
    price: {input: 1.0, output: 2.0}
  - id: sim-500
    price: {input: 1.0, output: 2.0}
  - id: sim-error-event
    price: {input: 1.0, output: 2.0}
teams:
  - name: alpha
    upstream_api_key: sk-reconcile-alpha
    keys: [{name: alpha-1, key: mg-alpha-key-1}]
  - name: beta
    upstream_api_key: sk-reconcile-beta
    keys: [{name: beta-1, key: mg-beta-key-1}]
admin_keys: [mg-admin-key]
`

// reconcileTeams are the run's teams: their modelgate key, key scope and platform key.
var reconcileTeams = []struct{ name, key, keyScope, platformKey string }{
	{"alpha", keyAlpha1, "key:alpha/alpha-1", "sk-reconcile-alpha"},
	{"beta", keyBeta, "key:beta/beta-1", "sk-reconcile-beta"},
}

// Issue 26, "the bill matches": a mixed run on chat, Messages and Responses (plain,
// streamed, fan-out, refused, one fan-out choice refused, cut by the platform in each way it
// can cut, left by its client, background jobs completed, cut and cancelled) reconciled
// against the simulated platform's own bill as docs/accounting.md section 7 does it:
//  1. a request settled with an empty usage_estimated equals the platform's bill for its
//     X-Request-Id, to the token;
//  2. a request settled at an estimate is at or above the bill, by exactly the margin the
//     accounting table gives for its case;
//  3. each team's day totals (the limiter's counters, GET /admin/usage, the usage history,
//     the spend ledger) equal the platform's bill for the team's key plus those margins, and
//     each other.
func TestReconcileMixedRunWithThePlatformsBill(t *testing.T) {
	cases := reconcileCases()
	up := &reconcilePlatform{cases: map[string]*casePlatform{}}
	for _, c := range cases {
		sim := platformsim.New(platformsim.Options{})
		for _, r := range c.replies {
			sim.Enqueue("/v1/responses", r)
		}
		up.cases[c.id] = &casePlatform{id: c.id, sim: sim, refuse: c.refuseFirst}
	}
	// One clock for every book, on one UTC day for the whole run.
	offset := testclock.SameDay(testclock.Origin(), time.Minute).Sub(time.Now())
	clock := func() time.Time { return time.Now().Add(offset) }
	ledger, _ := billing.NewLedger(context.Background(), nil, clock, nil)
	history := billing.NewRecorder(nil, 0, clock, nil)
	env := newResEnv(t, envOptions{yaml: reconcileYAML, upstream: up, now: clock, limiterNow: clock,
		store: tempBolt(t, store.BoltOptions{}), ledger: ledger, history: history})
	t.Cleanup(env.server.Close) // background jobs
	for _, p := range up.cases {
		t.Cleanup(p.sim.Close) // first: releases the stalls, so the platform's server can close
	}
	keyOf := map[string]string{}
	for _, tm := range reconcileTeams {
		keyOf[tm.name] = tm.key
	}

	start := time.Now()
	t.Run("mix", func(t *testing.T) {
		for _, c := range cases {
			t.Run(strings.TrimPrefix(c.id, "rc-"), func(t *testing.T) {
				t.Parallel()
				runCase(t, env, up, keyOf[c.team], c)
			})
		}
	})
	t.Logf("the mix of %d requests ran in %v", len(cases), time.Since(start).Round(time.Millisecond))

	// A job ends after its client's last poll saw it end, and a handler after its client
	// left: read the books once every case is settled, waiting on the settlement itself.
	var books reconcileBooks
	if !waitFor(10*time.Second, func() bool {
		books = readBooks(env.logs.String())
		return books.settledAll(cases)
	}) {
		t.Fatalf("not every case settled: %v", books.missing(cases))
	}

	margins := map[string]platformsim.Totals{} // per team: the declared margins' sum
	for _, c := range cases {
		p := up.get(c.id)
		billed := billedTotal(p.sim)
		// The platform billed the case under modelgate's own id for it, and no other.
		for id := range p.sim.Billed() {
			if id != books.settled[c.id].ours {
				t.Errorf("%s: the platform billed id %q; modelgate logged the request as %q", c.id, id, books.settled[c.id].ours)
			}
		}
		est := inputEstimate(t, p.sim)
		mIn, mOut := declaredMargin(c, billed, est)
		m := margins[c.team]
		m.InputTokens += mIn
		m.OutputTokens += mOut
		margins[c.team] = m
		got := books.settled[c.id]
		t.Logf("%-40s %-15s charged in=%-4d out=%-4d billed in=%-4d out=%-4d margin in=%d out=%d",
			c.id, got.Estimated, got.Input, got.Output, billed.InputTokens, billed.OutputTokens, got.Input-billed.InputTokens, got.Output-billed.OutputTokens)
		if c.refused != (billed.Requests == 0) {
			t.Errorf("%s: the platform billed %d calls: the case was not exercised as meant", c.id, billed.Requests)
		}
		if got.Estimated != c.want {
			t.Errorf("%s: settled with usage_estimated %q, want %q", c.id, got.Estimated, c.want)
		}
		if got.Input < billed.InputTokens || got.Output < billed.OutputTokens {
			t.Errorf("%s: charged in=%d out=%d, below the platform's bill in=%d out=%d", c.id, got.Input, got.Output, billed.InputTokens, billed.OutputTokens)
		}
		if got.Input-billed.InputTokens != mIn || got.Output-billed.OutputTokens != mOut {
			t.Errorf("%s (%q): charged in=%d out=%d, the platform billed in=%d out=%d: margin in=%d out=%d, docs/accounting.md gives in=%d out=%d",
				c.id, c.want, got.Input, got.Output, billed.InputTokens, billed.OutputTokens,
				got.Input-billed.InputTokens, got.Output-billed.OutputTokens, mIn, mOut)
		}
	}
	for _, p := range books.strays {
		t.Errorf("a request of no case was charged: %s", p)
	}

	for _, tm := range reconcileTeams {
		var bill platformsim.Totals
		for _, p := range up.cases {
			bill = addTotals(bill, p.sim.Totals(tm.platformKey))
		}
		m := margins[tm.name]
		t.Logf("%s: the platform billed in=%d out=%d in %d calls; declared margins in=%d out=%d",
			tm.name, bill.InputTokens, bill.OutputTokens, bill.Requests, m.InputTokens, m.OutputTokens)
	}

	// The day totals, read until every book has caught up with the last settlement.
	var problems []string
	if !waitFor(5*time.Second, func() bool {
		problems = checkDayTotals(t, env, up, ledger, history, clock(), cases, margins)
		return len(problems) == 0
	}) {
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// declaredMargin is what docs/accounting.md says a case is charged above the platform's
// bill. Where the input is estimated it is modelgate's estimate (section 1); the platform
// counts it its own way.
func declaredMargin(c reconcileCase, billed platformsim.Totals, est int64) (in, out int64) {
	switch {
	case c.want == "":
		return 0, 0
	case c.want == "early_cut":
		// What was read plus 16 output tokens, at most the rest of the output reservation.
		// Each case's client (or job) left only after modelgate read all the platform sent.
		return est - billed.InputTokens, min(16, reconcileCap-billed.OutputTokens)
	default:
		// The reservation of the calls charged at it: the input estimate and the output cap.
		return c.reserved*est - billed.InputTokens, c.reserved*reconcileCap - billed.OutputTokens
	}
}

// inputEstimate is modelgate's input estimate for one of the case's platform calls: one
// token per 4 bytes of the Responses request's instructions and input, as the platform
// received it.
func inputEstimate(t *testing.T, sim *platformsim.Sim) int64 {
	t.Helper()
	for _, r := range sim.Requests() {
		if r.Path == "/v1/responses" {
			return tokens.EstimateResponsesInput(r.Body)
		}
	}
	return 0
}

// settledLine is one request as modelgate's log says it was charged.
type settledLine struct {
	Team      string
	Input     int64
	Output    int64
	Estimated string
	ours      string // modelgate's id for the request: what the platform bills it under
}

// reconcileBooks is what modelgate's log says was charged, per case id (the client's
// X-Request-Id, logged as client_request_id).
type reconcileBooks struct {
	settled    map[string]settledLine
	background map[string]bool // ids whose job logged its end
	strays     []string        // charged lines of no case
}

// readBooks reads the access log lines ("request"), and the background jobs' end lines
// ("background response"), which carry a job's charge and its usage_estimated.
func readBooks(logs string) reconcileBooks {
	b := reconcileBooks{settled: map[string]settledLine{}, background: map[string]bool{}}
	for line := range strings.SplitSeq(logs, "\n") {
		var r struct {
			Msg       string `json:"msg"`
			Ours      string `json:"request_id"`
			RequestID string `json:"client_request_id"` // the case's id, sent as X-Request-Id
			Team      string `json:"team"`
			Input     int64  `json:"input_tokens"`
			Output    int64  `json:"output_tokens"`
			Estimated string `json:"usage_estimated"`
		}
		if json.Unmarshal([]byte(line), &r) != nil || r.Ours == "" {
			continue
		}
		switch r.Msg {
		case "request":
			if !strings.HasPrefix(r.RequestID, "rc-") {
				if r.Input != 0 || r.Output != 0 {
					b.strays = append(b.strays, line)
				}
				continue
			}
			if !b.background[r.RequestID] { // a job's submission charges nothing itself
				b.settled[r.RequestID] = settledLine{r.Team, r.Input, r.Output, r.Estimated, r.Ours}
			}
		case "background response":
			b.background[r.RequestID] = true
			b.settled[r.RequestID] = settledLine{r.Team, r.Input, r.Output, r.Estimated, r.Ours}
		}
	}
	return b
}

func (b reconcileBooks) settledAll(cases []reconcileCase) bool { return len(b.missing(cases)) == 0 }

func (b reconcileBooks) missing(cases []reconcileCase) []string {
	var out []string
	for _, c := range cases {
		_, ok := b.settled[c.id]
		if ok && (c.move == backgroundDone || c.move == backgroundCancel) {
			ok = b.background[c.id]
		}
		if !ok {
			out = append(out, c.id)
		}
	}
	return out
}

// checkDayTotals compares each team's day totals in every book modelgate keeps with the
// platform's bill for the team's key plus the declared margins.
func checkDayTotals(t *testing.T, env *resEnv, up *reconcilePlatform, ledger *billing.Ledger, history *billing.Recorder,
	now time.Time, cases []reconcileCase, margins map[string]platformsim.Totals) []string {
	t.Helper()
	var problems []string
	bills := map[string]platformsim.Totals{}
	for _, tm := range reconcileTeams {
		// The platform's bill for the team's key, and that every call of it is a case's.
		var bill, byID platformsim.Totals
		for _, c := range cases {
			p := up.get(c.id)
			bill = addTotals(bill, p.sim.Totals(tm.platformKey))
			if c.team == tm.name {
				byID = addTotals(byID, billedTotal(p.sim))
			}
		}
		if bill != byID {
			problems = append(problems, fmt.Sprintf("%s: the platform billed %+v to the team's key, %+v to its requests' ids", tm.name, bill, byID))
		}
		bills[tm.name] = bill
	}
	return append(problems, checkTeamBooks(t, env, ledger, history, now, bills, margins)...)
}

// checkTeamBooks compares each team's day totals in every book modelgate keeps (the limiter's
// team and key counters, GET /admin/usage, the usage history and its cost, the spend ledger)
// with the platform's bill for the team plus the declared margins.
func checkTeamBooks(t *testing.T, env *resEnv, ledger *billing.Ledger, history *billing.Recorder,
	now time.Time, bills, margins map[string]platformsim.Totals) []string {
	t.Helper()
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	day := now.UTC().Format("20060102")
	rows, err := history.Query(context.Background(), day, day, map[string]bool{"team": true})
	if err != nil {
		t.Fatal(err)
	}
	raw := adminUsage(t, env.testEnv)
	for _, tm := range reconcileTeams {
		bill, m := bills[tm.name], margins[tm.name]
		want := ratelimit.Usage{InputTokens: bill.InputTokens + m.InputTokens, OutputTokens: bill.OutputTokens + m.OutputTokens}
		check := func(book string, in, out int64) {
			if in != want.InputTokens || out != want.OutputTokens {
				fail("%s: %s holds in=%d out=%d, want the bill plus the margins: in=%d out=%d", tm.name, book, in, out, want.InputTokens, want.OutputTokens)
			}
		}
		u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: "team:" + tm.name}, {ID: tm.keyScope}})
		if err != nil {
			t.Fatal(err)
		}
		check("the limiter's team day counters", u[0].DayInputTokens, u[0].DayOutputTokens)
		check("the limiter's key day counters", u[1].DayInputTokens, u[1].DayOutputTokens)
		team := gjson.GetBytes(raw, `teams.#(name=="`+tm.name+`")`)
		check("GET /admin/usage (team)", team.Get("usage.day_input_tokens").Int(), team.Get("usage.day_output_tokens").Int())
		check("GET /admin/usage (key)", team.Get("keys.0.usage.day_input_tokens").Int(), team.Get("keys.0.usage.day_output_tokens").Int())
		var row billing.Row
		for _, r := range rows {
			if r.Team == tm.name {
				row = r
			}
		}
		check("the usage history", row.InputTokens, row.OutputTokens)
		wantSpend := want.InputTokens*1 + want.OutputTokens*2 // the prices of reconcileYAML
		if row.CostMicros != wantSpend {
			fail("%s: the usage history's cost is %d micro-units, want %d", tm.name, row.CostMicros, wantSpend)
		}
		for _, scope := range []string{"team:" + tm.name, tm.keyScope} {
			spent, _ := ledger.Spent(scope)
			if got := billing.MicrosOf(spent); got != wantSpend {
				fail("%s: the spend ledger holds %d micro-units for %s, want %d", tm.name, got, scope, wantSpend)
			}
		}
	}
	return problems
}

func addTotals(a, b platformsim.Totals) platformsim.Totals {
	return platformsim.Totals{Requests: a.Requests + b.Requests, InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens}
}

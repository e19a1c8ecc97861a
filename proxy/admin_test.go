package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/alerts"
	"modelgate/apitest"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/reqlog"
	"modelgate/testclock"
	"modelgate/upstream"
)

// GET /admin/health after calls that fall back and calls of weighted routes: the fallback
// by reason, the routes' split, each model's figures and the recent requests, newest first,
// team-scoped on request; bad parameters get a 4xx in the OpenAI shape.
func TestAdminHealth(t *testing.T) {
	var mu sync.Mutex
	var hooked []string // what the Fallback hook (the metrics) heard
	hooks := reqlog.Hooks{Fallback: func(model, served, reason string) {
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, model+">"+served+":"+reason)
	}}
	// Today's figures start again at midnight: the clock leaves the test ten minutes of the day.
	offset := testclock.SameDay(testclock.Origin(), 10*time.Minute).Sub(time.Now())
	clock := func() time.Time { return time.Now().Add(offset) }
	env := fallbackEnv(t, envOptions{hooks: hooks, now: clock, mutate: func(c *config.Config) {
		c.Models = append(c.Models, config.Model{ID: "assistant", Routes: []config.Route{{Upstream: "sim-v1", Weight: 1}, {Upstream: "sim-v2", Weight: 1}}})
	}})
	env.sim.SetModelScript("sim-big", platformsim.Reply{Status: 503, Body: errorJSON("server_error", "server_is_overloaded", "busy")})
	if status, h, b := env.do(t, "POST", "/v1/chat/completions", keyBeta, []byte(`{"model":"big","messages":[{"role":"user","content":"hi"}]}`)); status != 200 || h.Get(servedModelHeader) != "wide" {
		t.Fatalf("big: %d served by %q: %s", status, h.Get(servedModelHeader), b)
	}
	const calls = 6
	for range calls {
		if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"assistant","input":"hi"}`)); status != 200 {
			t.Fatalf("assistant: %d %s", status, b)
		}
	}
	var body []byte
	ok := waitFor(5*time.Second, func() bool { // the last request is reported after its answer
		var status int
		status, _, body = env.do(t, "GET", "/admin/health", "mg-admin-key", nil)
		return status == 200 && gjson.GetBytes(body, "recent.#").Int() == calls+1
	})
	if !ok {
		t.Fatalf("health: %s", body)
	}
	j := gjson.ParseBytes(body)
	if got := j.Get("fallbacks").Raw; got != `[{"model":"big","served_model":"wide","reason":"status_5xx","count":1}]` {
		t.Errorf("fallbacks %s", got)
	}
	mu.Lock()
	if fmt.Sprint(hooked) != "[big>wide:status_5xx]" {
		t.Errorf("the Fallback hook heard %v", hooked)
	}
	mu.Unlock()
	var routed int64
	for _, r := range j.Get("routes").Array() {
		if r.Get("model").Str != "assistant" {
			t.Errorf("route of %s", r.Raw)
		}
		routed += r.Get("calls").Int()
	}
	if routed != calls {
		t.Errorf("route calls %d, want %d: %s", routed, calls, j.Get("routes").Raw)
	}
	if got := j.Get(`models.#(model=="assistant").last_hour.requests`).Int(); got != calls {
		t.Errorf("assistant's requests in the hour: %d", got)
	}
	if got := j.Get(`models.#(model=="big").today`); got.Get("requests").Int() != 1 || got.Get("errors").Int() != 0 || got.Get("p95_ms").Float() <= 0 {
		t.Errorf("big today: %s", got.Raw)
	}
	if r := j.Get("recent.0"); r.Get("model").Str != "assistant" || r.Get("team").Str != "alpha" || r.Get("key").Str != "alpha-1" {
		t.Errorf("newest recent request %s", r.Raw)
	}
	if r := j.Get("recent.6"); r.Get("model").Str != "big" || r.Get("served_model").Str != "wide" || r.Get("status").Int() != 200 {
		t.Errorf("oldest recent request %s", r.Raw)
	}
	if got := j.Get("per_replica").Raw; got != `["models","routes","fallbacks","recent"]` {
		t.Errorf("per_replica %s", got)
	}
	if bytesContain(body, keyAlpha1) || bytesContain(body, keyBeta) {
		t.Error("a key's secret in the health answer")
	}

	_, _, b := env.do(t, "GET", "/admin/health?team=beta&limit=5", "mg-admin-key", nil)
	if got := gjson.GetBytes(b, "recent.#.team").Raw; got != `["beta"]` {
		t.Errorf("beta's recent requests: %s", got)
	}
	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"?team=nobody", 404, "unknown_team"},
		{"?limit=abc", 400, "invalid_value"},
		{"?limit=201", 400, "invalid_value"},
		{"?limit=-1", 400, "invalid_value"},
	} {
		status, _, b := env.do(t, "GET", "/admin/health"+tc.query, "mg-admin-key", nil)
		if status != tc.status || gjson.GetBytes(b, "error.code").Str != tc.code {
			t.Errorf("%s: %d %s", tc.query, status, b)
		}
	}
	if status, _, _ := env.do(t, "GET", "/admin/health", keyAlpha1, nil); status != http.StatusForbidden {
		t.Errorf("a team key read the health view: %d", status)
	}
}

func bytesContain(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestFallbackReason(t *testing.T) {
	for _, tc := range []struct {
		f    upstream.Failure
		want string
	}{
		{upstream.Failure{Status: 503, Kind: upstream.KindBreakerOpen}, reqlog.FallbackBreakerOpen},
		{upstream.Failure{Status: 504, Kind: "first_token_timeout"}, reqlog.FallbackFirstTokenTimeout},
		{upstream.Failure{Status: 400, Kind: "status_4xx", Body: []byte(`{"error":{"code":"context_length_exceeded"}}`)}, reqlog.FallbackContextLength},
		{upstream.Failure{Status: 400, Kind: "status_4xx", Body: []byte(`{"error":{"code":"invalid_value"}}`)}, reqlog.FallbackOther},
		{upstream.Failure{Status: 429, Kind: "status_4xx"}, reqlog.FallbackStatus429},
		{upstream.Failure{Status: 504, Kind: "timeout"}, reqlog.FallbackTimeout},
		{upstream.Failure{Status: 500, Kind: "status_5xx"}, reqlog.FallbackStatus5xx},
		{upstream.Failure{Status: 502, Kind: "dial"}, reqlog.FallbackUnreachable},
		{upstream.Failure{Status: 502, Kind: "reset"}, reqlog.FallbackUnreachable},
	} {
		if got := fallbackReason(&tc.f); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

// alertsStub is an AlertsView with fixed answers.
type alertsStub struct {
	crossed []alerts.Event
	err     error
	stats   alerts.Stats
}

func (a alertsStub) CrossedToday(context.Context) ([]alerts.Event, error) { return a.crossed, a.err }
func (a alertsStub) Deliveries() alerts.Stats                             { return a.stats }
func (a alertsStub) Exhausted(string, string)                             {}

// exhaustedNotes records the budgets the request path says refused a call.
type exhaustedNotes struct {
	alertsStub
	apitest.Notes
}

func (e *exhaustedNotes) Exhausted(scope, budget string) { e.Note(scope + " " + budget) }

// A call a budget refuses tells the alerts which scope's budget it was, so the budget's
// 100% is announced even when its settled use is short of the limit; a rate limit tells
// them nothing.
func TestBudgetRefusalsNoteExhausted(t *testing.T) {
	for _, tc := range []struct {
		name, limits, want string
	}{
		{"tokens_per_day", "    limits: {tokens_per_day: 10}\n", "team:alpha tokens_per_day"},
		{"spend_per_day", "    limits: {spend_per_day: 0.000001}\n", "team:alpha spend_per_day"},
		{"spend_per_month", "    limits: {spend_per_month: 0.000001}\n", "team:alpha spend_per_month"},
		{"requests_per_minute", "    limits: {requests_per_minute: 1}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := &exhaustedNotes{}
			yaml := strings.Replace(baseYAML, "  - name: alpha\n", "  - name: alpha\n"+tc.limits, 1)
			yaml = strings.Replace(yaml, "  - id: sim-chat\n", "  - id: sim-chat\n    price: {input: 1, output: 1}\n", 1)
			env := startEnv(t, envOptions{yaml: yaml, alerts: notes, ledger: memoryLedger(t)})
			body := []byte(`{"model":"sim-chat","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`)
			var last int
			for range 3 {
				last, _, _ = env.do(t, "POST", "/v1/chat/completions", keyAlpha1, body)
			}
			if last != 429 {
				t.Fatalf("the third call: %d, want a refusal", last)
			}
			got := notes.Got()
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("a rate limit noted %q", got)
				}
				return
			}
			if len(got) == 0 || got[0] != tc.want {
				t.Fatalf("notes %q, want %q first", got, tc.want)
			}
		})
	}
}

// GET /admin/usage shows the thresholds crossed today and the delivery counts; without
// alerts, or with a store that cannot be read, an empty list and the rest of the page.
func TestAdminUsageAlerts(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)
	crossed := []alerts.Event{{ID: "evt_1", Type: "budget.threshold", Time: at, Scope: "team", Team: "search",
		Budget: alerts.BudgetSpendDay, Period: "2026-11-26", Threshold: 80, Used: 8.2, Limit: 10, Currency: "USD"}}
	for _, tc := range []struct {
		name      string
		view      AlertsView
		wantCount int
		wantStats alerts.Stats
	}{
		{"no alerts", nil, 0, alerts.Stats{}},
		{"crossed", alertsStub{crossed: crossed, stats: alerts.Stats{Delivered: 4, Dropped: 1}}, 1, alerts.Stats{Delivered: 4, Dropped: 1}},
		{"store down", alertsStub{err: errors.New("down"), stats: alerts.Stats{Failed: 2}}, 0, alerts.Stats{Failed: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := adminUsage(t, startEnv(t, envOptions{alerts: tc.view}))
			var u struct {
				Teams  []json.RawMessage `json:"teams"`
				Alerts *struct {
					CrossedToday []alerts.Event `json:"crossed_today"`
					Deliveries   alerts.Stats   `json:"deliveries"`
				} `json:"alerts"`
			}
			if err := json.Unmarshal(b, &u); err != nil || u.Alerts == nil || u.Alerts.CrossedToday == nil || len(u.Teams) == 0 {
				t.Fatalf("usage %s", b)
			}
			if len(u.Alerts.CrossedToday) != tc.wantCount || u.Alerts.Deliveries != tc.wantStats {
				t.Fatalf("alerts %+v", u.Alerts)
			}
			if tc.wantCount > 0 {
				if got := u.Alerts.CrossedToday[0]; got.Threshold != 80 || got.Team != "search" || !got.Time.Equal(at) {
					t.Fatalf("crossed %+v", got)
				}
			}
		})
	}
}

// GET /admin/usage lists each calibrated model's ratio, spread and samples, and an empty
// list when nothing is calibrated.
func TestAdminUsageEstimates(t *testing.T) {
	tb := calibration.New(nil, nil, nil)
	for range 4 {
		tb.Observe("alpha", "gpt-4o-mini", 100, 100)
		tb.Observe("alpha", "gpt-4o-mini", 100, 200)
	}
	tb.Observe("alpha", "sim-chat", 100, 150)
	for _, tc := range []struct {
		name string
		src  *calibration.Table
		want []calibration.ModelFactor
	}{
		{"none", calibration.New(nil, nil, nil), []calibration.ModelFactor{}},
		{"calibrated", tb, []calibration.ModelFactor{
			{Model: "gpt-4o-mini", Factor: calibration.Factor{Ratio: (12.0 + 4) / 12, Spread: 0.5 / 1.5, Samples: 8}},
			{Model: "sim-chat", Factor: calibration.Factor{Ratio: (1.5 + 4) / 5, Samples: 1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := adminUsage(t, startEnv(t, envOptions{calibration: tc.src}))
			var u struct {
				Estimates []calibration.ModelFactor `json:"estimates"`
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(b, &raw); err != nil || raw["estimates"] == nil {
				t.Fatalf("no estimates in %s", b)
			}
			if err := json.Unmarshal(b, &u); err != nil || len(u.Estimates) != len(tc.want) {
				t.Fatalf("estimates = %s, want %+v", raw["estimates"], tc.want)
			}
			for i, w := range tc.want {
				g := u.Estimates[i]
				if g.Model != w.Model || g.Samples != w.Samples || !nearly(g.Ratio, w.Ratio) || !nearly(g.Spread, w.Spread) {
					t.Errorf("estimates[%d] = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func nearly(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// adminUsage is env's GET /admin/usage answer with the admin key, which must be a 200.
func adminUsage(t *testing.T, env *testEnv) []byte {
	t.Helper()
	status, _, b := env.do(t, "GET", "/admin/usage", keyAdmin, nil)
	if status != 200 {
		t.Fatalf("/admin/usage: %d %s", status, b)
	}
	return b
}

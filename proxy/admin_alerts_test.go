package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/alerts"
)

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
	mu    sync.Mutex
	notes []string
}

func (e *exhaustedNotes) Exhausted(scope, budget string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notes = append(e.notes, scope+" "+budget)
}

func (e *exhaustedNotes) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.notes)
}

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
			got := notes.got()
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
			env := startEnv(t, envOptions{alerts: tc.view})
			status, _, b := env.do(t, "GET", "/admin/usage", keyAdmin, nil)
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
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

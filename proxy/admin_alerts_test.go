package proxy

import (
	"context"
	"encoding/json"
	"errors"
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

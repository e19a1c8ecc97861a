package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"modelgate/alerts"
	"modelgate/proxy"
	"modelgate/store"
	"modelgate/testclock"
)

// The dashboard lists the budget thresholds crossed today, from a real Watcher's claims in
// the replica's store, and hides the section while nothing is crossed.
func TestDashboardAlertsInBrowser(t *testing.T) {
	bin := chromium(t)
	clock := testclock.Running()
	var watcher *alerts.Watcher
	var readings []alerts.Reading
	r := startReplica(t, envOptions{now: clock, alerts: func(st store.Store, now func() time.Time) proxy.AlertsView {
		w, err := alerts.NewWatcher(alerts.Options{Store: st, Sender: alerts.NewSender(alerts.SenderOptions{}), Now: now,
			Readings: func(context.Context) []alerts.Reading { return readings }})
		if err != nil {
			t.Fatal(err)
		}
		watcher = w
		return w
	}})

	b := openBrowser(t, bin, 60*time.Second)
	ctx := b.ctx
	must := b.must
	hidden := func() bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("alerts").hidden`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	must("sign in", chromedp.Navigate(r.front.URL+"/admin/ui/"), chromedp.WaitVisible(chromedp.ID("admin-key")),
		chromedp.SendKeys(chromedp.ID("admin-key"), adminKey), chromedp.Click(chromedp.CSS("#signin-form button")),
		chromedp.WaitVisible(chromedp.CSS(`article[data-team="alpha"]`)))
	if !hidden() {
		t.Fatal("the alerts section shows with nothing crossed")
	}

	readings = []alerts.Reading{
		{Scope: "team", Team: "alpha", Budget: alerts.BudgetSpendDay, Used: 4.2, Limit: 5, Currency: "EUR"},
		{Scope: "key", Team: "beta", Key: "beta-cfg", Budget: alerts.BudgetTokensDay, Used: 120000, Limit: 100000},
		// Sub-cent budgets must not read "€0.0001 of €0.0001".
		{Scope: "team", Team: "beta", Budget: alerts.BudgetSpendMonth, Used: 0.00005, Limit: 0.0001, Currency: "EUR"},
	}
	if err := watcher.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	must("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#alerts tr[data-alert="alpha spend_per_day 80"]`)))
	for sel, want := range map[string]string{
		`#alerts tr[data-alert="alpha spend_per_day 50"]`:           "team alpha",
		`#alerts tr[data-alert="alpha spend_per_day 80"]`:           "€4.20 of €5.00",
		`#alerts tr[data-alert="beta/beta-cfg tokens_per_day 100"]`: "120k of 100k",
		`#alerts tr[data-alert="beta spend_per_month 50"]`:          "€0.000050 of €0.00010 (50%)",
	} {
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil || !strings.Contains(v, want) {
			t.Errorf("%s shows %q (%v), want %q", sel, v, err, want)
		}
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#alerts tbody tr").length`)); n != 6 {
		t.Errorf("%d rows, want 6 (alpha 50 and 80, beta-cfg 50, 80 and 100, beta's month 50)", n)
	}
	shot(t, ctx, "dashboard-alerts.png")
}

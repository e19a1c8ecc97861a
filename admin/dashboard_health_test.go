package admin_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"modelgate/breaker"
	"modelgate/config"
	"modelgate/testclock"
)

// The health view after calls that produce its figures, on the simulated platform's
// failure model sim-503: big (sim-503) falls back to medium, twice on the platform's 503
// and, once its breaker opened, on the open breaker; assistant's calls split between its
// two routes. Then a team is created and its budget edited from the page (issue 45).
//
// The teams form talks to the replica's own POST and PATCH /admin/teams.
func TestDashboardHealthInBrowser(t *testing.T) {
	bin := chromium(t)
	// Today's figures start again at midnight: the clock leaves the test ten minutes of the
	// day, whatever hour it runs at.
	offset := testclock.SameDay(testclock.Origin(), 10*time.Minute).Sub(time.Now())
	clock := func() time.Time { return time.Now().Add(offset) }
	breakers := breaker.New(breaker.Options{Now: clock, Settings: breaker.Settings{Failures: 2, Window: time.Minute, Cooldown: time.Hour}})
	r := startReplica(t, envOptions{now: clock, breakers: breakers, mutate: func(c *config.Config) {
		c.Models = append(c.Models,
			config.Model{ID: "big", Upstream: "sim-503", Fallbacks: []string{"medium"}, Price: &config.Price{Input: 10, Output: 30}},
			config.Model{ID: "medium", Upstream: "sim-chat", Price: &config.Price{Input: 1, Output: 2}},
			config.Model{ID: "assistant", Routes: []config.Route{{Upstream: "sim-chat", Weight: 1}, {Upstream: "sim-long", Weight: 1}}})
		c.Teams[0].Limits.SpendPerDay = 5
	}})
	chat := func(key, model string) {
		t.Helper()
		status, h, b := r.do(t, "POST", "/v1/chat/completions", key, map[string]any{
			"model": model, "messages": []map[string]string{{"role": "user", "content": "hi"}}})
		if status != 200 {
			t.Fatalf("%s: %d %s", model, status, b)
		}
		if model == "big" && h.Get("x-modelgate-served-model") != "medium" {
			t.Fatalf("big served by %q", h.Get("x-modelgate-served-model"))
		}
	}
	for range 3 { // two 503s open big's breaker; the third call falls back on the open breaker
		chat(alphaKey, "big")
	}
	const routed = 8
	for range routed {
		chat(betaKey, "assistant")
	}
	// Yesterday beta used 2,717 tokens for €0.00003: its chart's middle tick was once
	// "1,358.5", whose first digit fell off the chart's left edge.
	yesterday := r.now().UTC().AddDate(0, 0, -1).Format("20060102")
	if err := r.st.Add(context.Background(), "usage_days", yesterday+"/beta/beta-cfg/sim-long",
		map[string]int64{"requests": 1, "input_tokens": 2000, "output_tokens": 717, "cost_micros": 30}, 0); err != nil {
		t.Fatal(err)
	}
	url := r.front.URL

	b := openBrowser(t, bin, 90*time.Second, chromedp.Flag("hide-scrollbars", true))
	ctx := b.ctx
	bl := &browserLog{}
	if err := chromedp.Listen(ctx, bl.listen); err != nil {
		t.Fatal(err)
	}
	must, eval, text := b.must, b.eval, b.text
	poll := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("%s: %v (page: %s)", what, err, eval(`document.getElementById("health").innerText`))
		}
	}

	must("sign in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(url+"/admin/ui/"), chromedp.WaitVisible(chromedp.ID("admin-key")),
		chromedp.SendKeys(chromedp.ID("admin-key"), adminKey), chromedp.Click(chromedp.CSS("#signin-form button")),
		chromedp.WaitVisible(chromedp.CSS(`#health-models tr[data-model="big"]`)))

	// Every axis label lies inside its chart, written compactly.
	if got := eval(`[...document.querySelectorAll("article svg text")].filter((e) => { const b = e.getBBox(); return b.x < 0 || b.x + b.width > 560; }).map((e) => e.textContent).join(",")`); got != "" {
		t.Errorf("axis labels outside their chart: %s", got)
	}
	if got := eval(`[...document.querySelectorAll('article[data-team="beta"] svg text')].map((e) => e.textContent).join(",")`); !strings.Contains(got, ",2.5k,") || strings.Contains(got, "1,358") {
		t.Errorf("beta's axis labels: %s", got)
	}

	// Fallbacks by reason: the platform's 503 twice, then the open breaker.
	for sel, want := range map[string]string{
		`#health-fallbacks tr[data-fallback="big medium status_5xx"] td:nth-child(4)`:   "2",
		`#health-fallbacks tr[data-fallback="big medium breaker_open"] td:nth-child(4)`: "1",
		`#health-fallbacks tr[data-fallback="big medium status_5xx"] td:nth-child(3)`:   "platform 5xx",
	} {
		if got := text(sel); got != want {
			t.Errorf("%s shows %q, want %q", sel, got, want)
		}
	}
	// The routes' split: both of assistant's routes, their calls adding up.
	split := eval(`[...document.querySelectorAll('#health-routes tr[data-route^="assistant "]')].map((tr) => tr.dataset.route.split(" ")[1] + "=" + tr.children[2].textContent).join(",")`)
	for _, part := range strings.Split(split, ",") {
		if !strings.HasPrefix(part, "sim-chat=") && !strings.HasPrefix(part, "sim-long=") {
			t.Errorf("route %q of assistant", part)
		}
	}
	if got := eval(`String([...document.querySelectorAll('#health-routes tr[data-route^="assistant "] td:nth-child(3)')].reduce((s, td) => s + Number(td.textContent), 0))`); got != strconv.Itoa(routed) {
		t.Errorf("assistant's route calls add up to %s, want %d (%s)", got, routed, split)
	}
	if got := eval(`String(document.querySelectorAll('#health-routes tr[data-route^="assistant "] .split span').length)`); got == "0" {
		t.Error("the routes show no share")
	}
	// Per-model figures: big's three requests, no errors (each was served), a latency.
	big := `#health-models tr[data-model="big"]`
	if got := text(big + ` td:nth-child(2)`); got != "3" {
		t.Errorf("big's requests in the hour: %q", got)
	}
	if got := text(big + ` td:nth-child(3)`); got != "0%" {
		t.Errorf("big's error rate: %q", got)
	}
	if got := text(big + ` td:nth-child(4)`); !strings.Contains(got, "ms") || !strings.Contains(got, " / ") {
		t.Errorf("big's p50 / p95: %q", got)
	}
	if got := text(`#health-models tr[data-model="assistant"] td:nth-child(5)`); got != "8" {
		t.Errorf("assistant's requests today: %q", got)
	}
	// Every replica's requests today, from the usage history, by the model that served.
	poll("the shared figures", `document.getElementById("health-shared").textContent.includes("medium 3 req")`)
	// The open breaker goes by the model users configured, and says what opened it.
	row := `#breakers tr[data-breaker="model:sim-503"]`
	if got := text(row); !strings.Contains(got, "big") || !strings.Contains(got, "open") || !strings.Contains(got, "opened by 2 failures") {
		t.Errorf("big's breaker shows %q", got)
	}
	if got := text(row + ` td.failures`); strings.HasPrefix(got, "0") {
		t.Errorf("an open breaker shows %q failures", got)
	}
	// Recent requests: metadata only, newest first; a team chosen narrows them.
	if got := eval(`String(document.querySelectorAll("#health-recent tbody tr").length)`); got != "11" {
		t.Errorf("%s recent requests shown, want 11", got)
	}
	if got := text(`#health-recent tbody tr:last-child`); !strings.Contains(got, "alpha") || !strings.Contains(got, "big") || !strings.Contains(got, "medium") || !strings.Contains(got, "€0.0000") {
		t.Errorf("the oldest recent request shows %q", got)
	}
	shot(t, ctx, "dashboard-health.png")
	eval(`(() => { const s = document.getElementById("health-team"); s.value = "alpha"; s.dispatchEvent(new Event("change")); return ""; })()`)
	poll("alpha's recent requests", `document.querySelectorAll("#health-recent tbody tr").length === 3`)
	if strings.Contains(text("#health"), alphaKey) || strings.Contains(text("#health"), betaKey) {
		t.Error("the health view shows a key's secret")
	}

	// A team created from the page, then its budget edited.
	must("open the teams form", chromedp.Click(chromedp.ID("team-new")), chromedp.WaitVisible(chromedp.ID("team-form")))
	must("create team gamma", chromedp.SendKeys(chromedp.ID("team-name"), "gamma"),
		chromedp.SendKeys(chromedp.ID("team-models"), "sim-chat, medium"),
		chromedp.SendKeys(chromedp.CSS(`#team-limits input[name=spend_per_day]`), "3"),
		chromedp.SendKeys(chromedp.CSS(`#team-end-user input[name=requests_per_minute]`), "20"),
		chromedp.Click(chromedp.ID("team-submit")),
		chromedp.WaitVisible(chromedp.CSS(`article[data-team="gamma"]`)))
	gamma := `article[data-team="gamma"]`
	if got := text(gamma + ` [data-meter="spend-day"] .fig`); !strings.Contains(got, "of €3.00") {
		t.Errorf("gamma's spend budget shows %q", got)
	}
	if got := text(gamma + ` .badge.source`); got != "api" {
		t.Errorf("gamma's source %q", got)
	}
	must("edit gamma's budget", chromedp.Click(chromedp.CSS(gamma+` button.edit`)), chromedp.WaitVisible(chromedp.ID("team-form")))
	if got := eval(`document.querySelector('#team-limits input[name=spend_per_day]').value + "|" + document.getElementById("team-models").value + "|" + document.getElementById("team-name").disabled`); got != "3|sim-chat, medium|true" {
		t.Errorf("the edit form starts from %q", got)
	}
	clear := `document.querySelector('#team-limits input[name=spend_per_day]').value = ""`
	eval(clear)
	must("set spend per day to 7", chromedp.SendKeys(chromedp.CSS(`#team-limits input[name=spend_per_day]`), "7"),
		chromedp.SendKeys(chromedp.CSS(`#team-limits input[name=spend_per_month]`), "100"),
		chromedp.Click(chromedp.ID("team-submit")))
	poll("gamma's new budget", `(document.querySelector('article[data-team="gamma"] [data-meter="spend-day"] .fig') || {}).textContent.includes("of €7.00")`)
	if got := text(gamma + ` [data-meter="spend-month"] .fig`); !strings.Contains(got, "of €100.00") {
		t.Errorf("gamma's monthly budget shows %q", got)
	}
	// A team of the config file is changed in the file: the API's 409 message is shown.
	must("edit alpha's budget", chromedp.Click(chromedp.CSS(`article[data-team="alpha"] button.edit`)), chromedp.WaitVisible(chromedp.ID("team-form")))
	eval(clear)
	must("set alpha's spend per day to 9", chromedp.SendKeys(chromedp.CSS(`#team-limits input[name=spend_per_day]`), "9"),
		chromedp.Click(chromedp.ID("team-submit")))
	poll("the 409's message", `document.getElementById("team-form-error").textContent.length > 0`)
	if got := text(`#team-form-error`); !strings.Contains(strings.ToLower(got), "config") {
		t.Errorf("editing a config team shows %q", got)
	}
	if got := text(`article[data-team="alpha"] [data-meter="spend-day"] .fig`); !strings.Contains(got, "of €5.00") {
		t.Errorf("alpha's budget changed to %q", got)
	}

	_, errs := bl.snapshot()
	for _, e := range errs {
		if !strings.Contains(e, "409") { // the refused edit is logged by the browser
			t.Errorf("browser complained: %s", e)
		}
	}
}

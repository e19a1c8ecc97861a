package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"modelgate/billing"
	"modelgate/breaker"
	"modelgate/config"
	"modelgate/testclock"
)

// chromium is Debian's browser, which .ci/run installs. Without it the test is skipped
// locally; in CI (CI set) it fails, so a missing install cannot pass as green.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found and CI is set")
	}
	t.Skip("chromium not installed")
	return ""
}

// browserLog collects what the page asked for and what it complained about.
type browserLog struct {
	mu       sync.Mutex
	requests []string
	errors   []string
}

func (b *browserLog) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, ev.Request.URL)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value))
			}
			b.errors = append(b.errors, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		b.errors = append(b.errors, "exception: "+ev.ExceptionDetails.Text)
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			b.errors = append(b.errors, "log "+string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	}
}

func (b *browserLog) snapshot() (requests, errors []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...), append([]string(nil), b.errors...)
}

// seedHistory writes 29 past days of usage straight into the store, so the chart has a
// month to draw.
func seedHistory(t *testing.T, r *replica) {
	t.Helper()
	today := r.now().UTC()
	for i := 1; i < 30; i++ {
		d := today.AddDate(0, 0, -i)
		day := d.Format("20060102")
		for j, team := range []string{"alpha", "beta"} {
			// Weekdays busy, weekends quiet, slowly growing, with some wobble.
			f := 1.0
			if wd := d.Weekday(); wd == time.Saturday || wd == time.Sunday {
				f = 0.3
			}
			f *= (0.6 + 0.4*float64(30-i)/30) * (0.85 + 0.3*float64((i*37+j*11)%10)/10) * (1 + 0.5*float64(j))
			scale := int64(100 * f)
			in, out := 900*scale, 260*scale
			cost := in*2 + out*8 // sim-long's price, micro-units
			err := r.st.Add(context.Background(), "usage_days", day+"/"+team+"/"+team+"-cfg/sim-long",
				map[string]int64{"requests": 40 * scale, "input_tokens": in, "output_tokens": out, "cost_micros": cost}, 0)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestDashboardInBrowser(t *testing.T) {
	bin := chromium(t)
	// The page shows requests "this minute": the limiter's minute starts with the test, so
	// the figures cannot reset under it when the wall clock crosses a minute.
	offset := testclock.SameDay(testclock.Origin(), 10*time.Minute).Truncate(time.Minute).Sub(time.Now())
	clock := func() time.Time { return time.Now().Add(offset) }
	breakers := breaker.New(breaker.Options{Now: clock, Settings: breaker.Settings{Failures: 2, Window: time.Minute, Cooldown: time.Hour}})
	r := startReplica(t, envOptions{now: clock, breakers: breakers, mutate: func(c *config.Config) {
		c.Teams[0].Limits = config.Limits{RequestsPerMinute: 600, TokensPerDay: 2_000_000, SpendPerDay: 5, SpendPerMonth: 60}
		c.Teams[1].Limits = config.Limits{ConcurrentRequests: 8, SpendPerMonth: 40}
		c.Teams[1].Models = []string{"sim-chat", "sim-long"}
		c.Models = append(c.Models, config.Model{ID: "sim-json", Upstream: "sim-json"}) // one beta may not use
		c.Usage.TagKeys = []string{"feature", "customer"}
	}})
	// Attributed requests (issue 28), straight into the history: alpha's search feature
	// used by two end users, its chat feature by one.
	u := billing.Usage{InputTokens: 1000, OutputTokens: 100}
	r.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 1_500_000, "user-1", []billing.Tag{{Key: "feature", Value: "search"}})
	r.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 500_000, "user-2", []billing.Tag{{Key: "feature", Value: "search"}})
	r.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 250_000, "user-1", []billing.Tag{{Key: "feature", Value: "chat"}})
	seedHistory(t, r)
	for range 3 {
		if got := r.chat(t, alphaKey); got != 200 {
			t.Fatal(got)
		}
	}
	for range 2 {
		if status, _, _ := r.do(t, "POST", "/v1/chat/completions", betaKey, longChat(false)); status != 200 {
			t.Fatal(status)
		}
	}
	r.issue(t, "beta", "nightly-batch", map[string]any{"limits": map[string]any{"spend_per_day": 2}})
	breakers.Report("model:sim-json", true)
	breakers.Report("model:sim-json", true) // open for the hour
	breakers.Report("model:sim-chat", true) // one failure: closed, listed

	b := openBrowser(t, bin, 90*time.Second, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("hide-scrollbars", true))
	ctx := b.ctx
	bl := &browserLog{}
	if err := chromedp.Listen(ctx, bl.listen); err != nil {
		t.Fatal(err)
	}
	page := r.front.URL + "/admin/ui/"
	must, eval, text := b.must, b.eval, b.text

	must("open the page", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("admin-key")))

	// A wrong key sees no data and is not kept.
	must("sign in with a wrong key", chromedp.SendKeys(chromedp.ID("admin-key"), "mg-not-the-admin-key"),
		chromedp.Click(chromedp.CSS("#signin-form button")))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("signin-error").textContent.length > 0`)); err != nil {
		t.Fatalf("no error shown for a wrong key: %v", err)
	}
	if got := eval(`JSON.stringify([document.getElementById("dash").hidden, document.querySelectorAll("#teams article").length, document.body.innerText.includes("alpha"), sessionStorage.length])`); got != "[true,0,false,0]" {
		t.Fatalf("after a wrong key: [dash hidden, team cards, alpha on the page, session items] = %s", got)
	}
	// The refused API calls: expected, left out below. The page shows its error at the first
	// refusal, while the other calls may still be on their way, so wait until each of the
	// four has been refused (and logged by the browser) before drawing the line.
	var wrongKeyErrors []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, wrongKeyErrors = bl.snapshot()
		if len(wrongKeyErrors) >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The admin key shows every team with its figures.
	must("sign in", chromedp.SendKeys(chromedp.ID("admin-key"), adminKey), chromedp.Click(chromedp.CSS("#signin-form button")),
		chromedp.WaitVisible(chromedp.CSS(`article[data-team="alpha"] svg`)), chromedp.WaitVisible(chromedp.CSS(`article[data-team="beta"] svg`)))
	if got := eval(`sessionStorage.getItem("modelgate.adminKey") === ` + fmt.Sprintf("%q", adminKey) + ` && localStorage.length === 0 && document.cookie === "" ? "session only" : "elsewhere"`); got != "session only" {
		t.Fatalf("the admin key is kept %s", got)
	}
	for sel, want := range map[string]string{
		`article[data-team="alpha"] [data-meter="day-requests"] .fig`: "3 · no limit",
		`article[data-team="beta"] [data-meter="day-requests"] .fig`:  "2 · no limit",
		`article[data-team="alpha"] [data-meter="spend-day"] .fig`:    "of €5.00",
		`article[data-team="beta"] [data-meter="spend-month"] .fig`:   "of €40.00",
		`article[data-team="alpha"] .rpm`:                             "3 req/min now of 600",
		`[data-stat="requests"] .value`:                               "5",
		`article[data-team="beta"] tr[data-key="nightly-batch"]`:      "api",
		`#breakers tr[data-breaker="model:sim-json"]`:                 "open",
		`#breakers tr[data-breaker="model:sim-chat"] td:nth-child(3)`: "1",
	} {
		if got := text(sel); !strings.Contains(got, want) {
			t.Errorf("%s shows %q, want %q", sel, got, want)
		}
	}
	if n := eval(`String(document.querySelectorAll('article[data-team="alpha"] svg rect').length)`); n != "30" {
		t.Errorf("alpha's chart has %s bars, want 30", n)
	}
	// Every axis label lies inside its chart (a middle tick "1,358.5" once lost its first
	// digit past the left edge), and is written compactly.
	if got := eval(`[...document.querySelectorAll("article svg text")].filter((e) => { const b = e.getBBox(); return b.x < 0 || b.x + b.width > 560; }).map((e) => e.textContent).join(",")`); got != "" {
		t.Errorf("axis labels outside their chart: %s", got)
	}
	if got := eval(`[...document.querySelectorAll("article svg text")].map((e) => e.textContent).filter((s) => s.length > 7).join(",")`); got != "" {
		t.Errorf("axis labels longer than 7 characters: %s", got)
	}

	// Spend by tag (the first of usage.tag_keys) and, chosen instead, by end user (issue 28).
	attr := `#attribution tr[data-team="alpha"]`
	must("spend by feature", chromedp.WaitVisible(chromedp.CSS(attr+`[data-value="search"]`)))
	// Over the default 30 days, the seeded month without tags leads; today, the tags do.
	if got := eval(`[...document.querySelectorAll('#attribution tr[data-team="alpha"]')].map((r) => r.dataset.value).join(",")`); got != "(none),search,chat" {
		t.Errorf("alpha's rows of 30 days by cost: %s", got)
	}
	choose := func(id, value string) {
		t.Helper()
		eval(`(() => { const s = document.getElementById("` + id + `"); s.value = "` + value + `"; s.dispatchEvent(new Event("change")); return ""; })()`)
	}
	choose("attr-period", "1")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(document.querySelector('#attribution tr[data-team="alpha"][data-value="(none)"] td:nth-child(3)') || {}).textContent === "3"`)); err != nil {
		t.Fatalf("today's untagged alpha requests never showed as 3: %v", err)
	}
	if got := eval(`[...document.querySelectorAll('#attr-split option')].map((o) => o.value).join(",")`); got != "tag:feature,tag:customer,user" {
		t.Errorf("split choices %q", got)
	}
	for sel, want := range map[string]string{
		attr + `[data-value="search"] td.cost`: "€2.00", attr + `[data-value="chat"] td.cost`: "€0.25",
		attr + `[data-value="(none)"] td:nth-child(3)`:                           "3", // the three untagged chats
		`#attribution tr[data-team="beta"][data-value="(none)"] td:nth-child(3)`: "2",
	} {
		if got := text(sel); got != want {
			t.Errorf("%s shows %q, want %q", sel, got, want)
		}
	}
	choose("attr-split", "user")
	must("spend by end user", chromedp.WaitVisible(chromedp.CSS(attr+`[data-value="user-2"]`)))
	if got := text(attr + `[data-value="user-1"] td.cost`); got != "€1.75" {
		t.Errorf("user-1's spend %q, want €1.75", got)
	}
	if got := text(`#attr-head`); got != "End user" {
		t.Errorf("column head %q", got)
	}

	// A key issued from the page works at once; revoked from the page, it fails.
	must("issue a key", chromedp.SendKeys(chromedp.CSS(`article[data-team="alpha"] input[name=name]`), "from-the-page"),
		chromedp.Click(chromedp.CSS(`article[data-team="alpha"] .issue button`)),
		chromedp.WaitVisible(chromedp.CSS(`article[data-team="alpha"] .secret-value`)),
		chromedp.WaitVisible(chromedp.CSS(`article[data-team="alpha"] tr[data-key="from-the-page"]`)))
	secret := text(`article[data-team="alpha"] .secret-value`)
	if !strings.HasPrefix(secret, "mg-") {
		t.Fatalf("secret shown: %q", secret)
	}
	if got := r.chat(t, secret); got != http.StatusOK {
		t.Fatalf("chat with the key issued from the page: %d", got)
	}
	// issue 28: audit. The issue shows in the audit view at once, by the admin key's
	// fingerprint, without the secret; the key issued before sign-in is listed below it.
	issuedRow := `#audit tr[data-action="key.issued"][data-target="alpha/from-the-page"]`
	must("see the issue in the audit view", chromedp.WaitVisible(chromedp.CSS(issuedRow)))
	if got := text(issuedRow); !strings.Contains(got, "admin:"+fingerprint(adminKey)) || !strings.Contains(got, "id=key_") {
		t.Errorf("the audit row shows %q", got)
	}
	if got := eval(`[...document.querySelectorAll("#audit tbody tr")].map((tr) => tr.dataset.target).join(",")`); got != "alpha/from-the-page,beta/nightly-batch" {
		t.Errorf("the audit view lists %q, newest first", got)
	}
	if strings.Contains(text("#audit"), secret) {
		t.Error("the audit view shows the secret")
	}
	shot(t, ctx, "dashboard-1280x800.png")

	must("revoke it", chromedp.Click(chromedp.CSS(`tr[data-key="from-the-page"] button.revoke`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="from-the-page"] button.armed`)),
		chromedp.Click(chromedp.CSS(`tr[data-key="from-the-page"] button.revoke`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-key="from-the-page"]`)))
	if got := r.chat(t, secret); got != http.StatusUnauthorized {
		t.Fatalf("chat with the key revoked from the page: %d", got)
	}
	must("see the revoke in the audit view", chromedp.WaitVisible(chromedp.CSS(`#audit tbody tr:first-child[data-action="key.revoked"][data-target="alpha/from-the-page"]`)))

	// The issue form offers the team's models (every configured one for a team without a
	// list); a key issued with one of them shows it in the key list and may use it alone.
	for team, want := range map[string]string{"alpha": "sim-chat,sim-long,sim-json", "beta": "sim-chat,sim-long"} {
		if got := eval(`[...document.querySelectorAll('article[data-team="` + team + `"] select[name=models] option')].map((o) => o.value).join(",")`); got != want {
			t.Errorf("%s's issue form offers models %q, want %q", team, got, want)
		}
	}
	must("issue a key narrowed to one model", chromedp.SendKeys(chromedp.CSS(`article[data-team="beta"] input[name=name]`), "long-only"),
		chromedp.Click(chromedp.CSS(`article[data-team="beta"] select[name=models] option[value="sim-long"]`)),
		chromedp.Click(chromedp.CSS(`article[data-team="beta"] .issue button`)),
		chromedp.WaitVisible(chromedp.CSS(`article[data-team="beta"] .secret-value`)),
		chromedp.WaitVisible(chromedp.CSS(`article[data-team="beta"] tr[data-key="long-only"]`)))
	if got := text(`tr[data-key="long-only"] td.models`); got != "sim-long" {
		t.Errorf("the narrowed key's row shows models %q, want sim-long", got)
	}
	if got := text(`tr[data-key="nightly-batch"] td.models`); got != "team's" {
		t.Errorf("a key without a list shows models %q, want team's", got)
	}
	narrow := text(`article[data-team="beta"] .secret-value`)
	if status, _, body := r.do(t, "POST", "/v1/chat/completions", narrow, longChat(false)); status != http.StatusOK {
		t.Fatalf("the narrowed key on its model: %d %s", status, body)
	}
	if got := r.chat(t, narrow); got != http.StatusNotFound {
		t.Fatalf("the narrowed key on a model of its team outside its list: %d, want 404", got)
	}

	// Phone width: everything fits the screen's width.
	must("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Sleep(200*time.Millisecond))
	if got := eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); got != "true" {
		t.Errorf("the page is wider than a phone: scrollWidth %s > %s", eval(`String(document.documentElement.scrollWidth)`), eval(`String(window.innerWidth)`))
	}
	shot(t, ctx, "dashboard-phone.png")

	requests, errs := bl.snapshot()
	for _, u := range requests {
		if !strings.HasPrefix(u, r.front.URL+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page loaded %s from outside modelgate", u)
		}
	}
	if len(requests) < 5 {
		t.Errorf("only %d requests seen: is the listener working?", len(requests))
	}
	for _, e := range errs[len(wrongKeyErrors):] {
		t.Errorf("browser complained: %s", e)
	}
	for _, e := range wrongKeyErrors {
		if !strings.Contains(e, "401") {
			t.Errorf("browser complained before sign-in: %s", e)
		}
	}
}

// docsScreenshots are the screenshots the README shows: the test's name of each, and its
// file under docs/img.
var docsScreenshots = map[string]string{"dashboard-1280x800.png": "dashboard.png", "dashboard-health.png": "dashboard-health.png"}

// shot saves a full-page screenshot under the test's output folder; with
// MODELGATE_DOCS_SCREENSHOT=1 the ones of docsScreenshots also replace their docs/img files.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if doc, ok := docsScreenshots[name]; ok && os.Getenv("MODELGATE_DOCS_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join("..", "docs", "img", doc), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

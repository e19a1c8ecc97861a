package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"modelgate/alerts"
	"modelgate/apitest"
)

const alertSecret = "e2e-alert-secret-3f9a"

// hookReceiver is a webhook receiver: it verifies each signature and keeps the events; with
// hang set it holds every delivery open until the test ends, as a dead receiver would.
type hookReceiver struct {
	srv  *httptest.Server
	hang bool
	stop chan struct{}

	mu      sync.Mutex
	events  []alerts.Event
	arrived int
	badSigs int
}

func startHookReceiver(t *testing.T, hang bool) *hookReceiver {
	r := &hookReceiver{hang: hang, stop: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.arrived++
		r.mu.Unlock()
		if r.hang {
			select {
			case <-r.stop:
			case <-req.Context().Done():
			}
			return
		}
		var ev alerts.Event
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := alerts.Verify(alertSecret, req.Header.Get(alerts.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
			r.badSigs++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if json.Unmarshal(body, &ev) == nil {
			r.events = append(r.events, ev)
		}
	}))
	// The hanging handlers are released before the server closes (Close waits for them).
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() { close(r.stop) })
	return r
}

func (r *hookReceiver) snapshot() ([]alerts.Event, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alerts.Event(nil), r.events...), r.arrived, r.badSigs
}

// alertsSection is the config's alerts block with one webhook to url, checked often.
func alertsSection(url string) string {
	return "alerts:\n  check_interval: 100ms\n  webhooks:\n    - url: " + url + "/hook?token=tok-in-url\n      secret: " + alertSecret + "\n"
}

// betaBudgetConfig gives team beta a daily budget of 20 tokens, which its first call (about
// 21 tokens) uses up, so that one check sees it past every threshold; the alerts go to r.
// (A budget that refuses calls whose reservation does not fit can stop short of 100%: the
// unit tests in alerts cover the thresholds one by one.)
func betaBudgetConfig(p *platform, r *hookReceiver) string {
	return strings.Replace(keysConfig(p, alertsSection(r.srv.URL)), "  - name: beta\n",
		"  - name: beta\n    limits: {tokens_per_day: 20}\n", 1)
}

// spendBeta uses up beta's daily tokens: calls until one is refused.
func spendBeta(t *testing.T, g *gateway) {
	t.Helper()
	for range 20 {
		if code, _ := opsMust(t, "POST", g.URL+"/v1/chat/completions", betaKey, chatBody("sim-chat", "hello there", false)); code != 200 {
			return
		}
	}
	t.Fatal("beta's daily tokens were never used up")
}

// poll waits for cond, bounded.
func poll(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	apitest.WaitFor(t, limit, what, cond)
}

// Through the real binary and the simulated platform: team beta's requests cross its daily
// token budget; each threshold is announced once, signed, named by team and budget, and shown
// by /admin/usage; a key issued through the admin API is announced too. Nothing secret is logged.
func TestBudgetAlertsEndToEnd(t *testing.T) {
	recv := startHookReceiver(t, false)
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: betaBudgetConfig(p, recv), Env: keysEnv(p)})
	spendBeta(t, g)
	poll(t, "the 100% event", 20*time.Second, func() bool {
		evs, _, _ := recv.snapshot()
		return slices.ContainsFunc(evs, func(e alerts.Event) bool { return e.Threshold == 100 })
	})
	// The receiver has the third event before its sender has read the answer and counted
	// the delivery: /admin/usage is read until it counts all three (or the bound passes).
	var code int
	var body string
	var usage struct {
		Alerts struct {
			CrossedToday []alerts.Event `json:"crossed_today"`
			Deliveries   alerts.Stats   `json:"deliveries"`
		} `json:"alerts"`
	}
	counted := func() bool {
		code, body = opsMust(t, "GET", g.URL+"/admin/usage", adminKey, "")
		return code == 200 && json.Unmarshal([]byte(body), &usage) == nil && usage.Alerts.Deliveries.Delivered >= 3
	}
	deadline := time.Now().Add(10 * time.Second)
	for !counted() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if code != 200 || len(usage.Alerts.CrossedToday) != 3 || usage.Alerts.Deliveries.Delivered != 3 {
		t.Fatalf("/admin/usage: %d %s", code, body)
	}

	code, body = opsMust(t, "POST", g.URL+"/admin/keys", adminKey, `{"team":"alpha","name":"alerted"}`)
	if code != 201 {
		t.Fatalf("issue: %d %s", code, body)
	}
	poll(t, "the key.issued event", 10*time.Second, func() bool {
		evs, _, _ := recv.snapshot()
		return slices.ContainsFunc(evs, func(e alerts.Event) bool { return e.Type == "key.issued" && e.Key == "alerted" })
	})
	// By now checks have run many times since the 100% event: none repeated a threshold.
	evs, _, bad := recv.snapshot()
	var got []int
	for _, e := range evs {
		if e.Type != "budget.threshold" {
			continue
		}
		if e.Scope != "team" || e.Team != "beta" || e.Budget != alerts.BudgetTokensDay || e.Limit != 20 || e.Used < 20 {
			t.Fatalf("event %+v", e)
		}
		got = append(got, e.Threshold)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{50, 80, 100}) || bad != 0 {
		t.Fatalf("thresholds %v (%d bad signatures)", got, bad)
	}
	out := g.Output.String()
	for _, secret := range []string{alertSecret, "tok-in-url"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log shows %q", secret)
		}
	}
}

// A receiver that takes deliveries and never answers does not slow requests: the same
// requests are timed before any delivery and while deliveries hang.
func TestHangingReceiverDoesNotSlowRequests(t *testing.T) {
	recv := startHookReceiver(t, true)
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: betaBudgetConfig(p, recv), Env: keysEnv(p)})
	timeRequests := func(n int) []time.Duration {
		var out []time.Duration
		for range n {
			start := time.Now()
			if code, body := opsMust(t, "POST", g.URL+"/v1/chat/completions", alphaKey, chatBody("sim-chat", "hello", false)); code != 200 {
				t.Fatalf("chat: %d %s", code, body)
			}
			out = append(out, time.Since(start))
		}
		return out
	}
	timeRequests(5) // warm up
	before := timeRequests(30)
	spendBeta(t, g)
	for i := range 6 { // key events too: more deliveries than the sender has workers
		opsMust(t, "POST", g.URL+"/admin/keys", adminKey, `{"team":"alpha","name":"hang-`+string(rune('a'+i))+`"}`)
	}
	poll(t, "deliveries hanging at the receiver", 20*time.Second, func() bool { _, n, _ := recv.snapshot(); return n >= 4 })
	during := timeRequests(30)
	med := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
	t.Logf("median request time: %v before, %v with deliveries hanging; slowest %v", med(before), med(during), slices.Max(during))
	if med(during) > 2*med(before)+50*time.Millisecond || slices.Max(during) > time.Second {
		t.Fatalf("requests slowed: median %v before, %v while the receiver hangs (slowest %v)", med(before), med(during), slices.Max(during))
	}
	if _, arrived, _ := recv.snapshot(); arrived > 4 {
		// Four workers at most: a fifth delivery would mean the queue is not bounded by them.
		t.Fatalf("%d deliveries open at once, want at most the 4 workers", arrived)
	}
}

// A reload (SIGHUP) points the events at the new webhooks: a key issued after it is
// announced to the new receiver only.
func TestAlertWebhooksReload(t *testing.T) {
	before, after := startHookReceiver(t, false), startHookReceiver(t, false)
	p := startPlatform(t)
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, alertsSection(before.srv.URL)), Env: keysEnv(p)})
	issued := func(r *hookReceiver, name string) func() bool {
		return func() bool {
			evs, _, _ := r.snapshot()
			return slices.ContainsFunc(evs, func(e alerts.Event) bool { return e.Type == "key.issued" && e.Key == name })
		}
	}
	if code, body := opsMust(t, "POST", g.URL+"/admin/keys", adminKey, `{"team":"alpha","name":"first"}`); code != 201 {
		t.Fatalf("issue: %d %s", code, body)
	}
	poll(t, "the first key's event", 10*time.Second, issued(before, "first"))

	reload(t, g, keysConfig(p, alertsSection(after.srv.URL)), "config reloaded", 1)
	if code, body := opsMust(t, "POST", g.URL+"/admin/keys", adminKey, `{"team":"alpha","name":"second"}`); code != 201 {
		t.Fatalf("issue: %d %s", code, body)
	}
	poll(t, "the second key's event at the new webhook", 10*time.Second, issued(after, "second"))
	if issued(before, "second")() {
		t.Fatal("the old webhook still gets events after the reload")
	}
}

// A restarted gateway on the same data finds the thresholds already claimed and sends none
// again. That its check ran after the restart is shown by a key expiry it announced, which
// the same check finds right after the budgets.
func TestBudgetAlertsNotResentAfterRestart(t *testing.T) {
	recv := startHookReceiver(t, false)
	p := startPlatform(t)
	cfg := strings.Replace(betaBudgetConfig(p, recv), "data_path: data", "data_path: "+t.TempDir(), 1)
	g := startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	spendBeta(t, g)
	thresholdEvents := func() int {
		evs, _, _ := recv.snapshot()
		n := 0
		for _, e := range evs {
			if e.Type == "budget.threshold" {
				n++
			}
		}
		return n
	}
	poll(t, "three threshold events", 20*time.Second, func() bool { return thresholdEvents() == 3 })
	g.Signal(t, syscall.SIGTERM)
	if code := g.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}

	g = startGateway(t, gatewayOptions{ConfigYAML: cfg, Env: keysEnv(p)})
	exp := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	if code, body := opsMust(t, "POST", g.URL+"/admin/keys", adminKey, `{"team":"alpha","name":"short","expires_at":"`+exp+`"}`); code != 201 {
		t.Fatalf("issue: %d %s", code, body)
	}
	poll(t, "the short key's expiry", 20*time.Second, func() bool {
		evs, _, _ := recv.snapshot()
		return slices.ContainsFunc(evs, func(e alerts.Event) bool { return e.Type == "key.expired" && e.Key == "short" })
	})
	if n := thresholdEvents(); n != 3 {
		t.Fatalf("%d threshold events after the restart, want the 3 from before it", n)
	}
}

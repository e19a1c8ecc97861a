package upstream

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/breaker"
	"modelgate/config"
)

// fakeHealth refuses the names in blocked and records every report as "name:ok|fail".
type fakeHealth struct {
	mu      sync.Mutex
	blocked map[string]bool
	reports apitest.Notes
}

func (h *fakeHealth) Allow(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.blocked[name]
}

func (h *fakeHealth) Report(name string, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "fail"
	}
	h.reports.Note(name + "=" + outcome)
}

func (h *fakeHealth) got() []string { return h.reports.Got() }

func TestGatewayReportsToBreakers(t *testing.T) {
	fa, fb := KeyBreaker(Fingerprint("sk-a")), KeyBreaker(Fingerprint("sk-b"))
	tests := []struct {
		name        string
		pool        []string
		model       string // the body's model
		status      map[string][]int
		blocked     []string
		wantKeys    string // the keys the platform saw, in order
		wantReports []string
		wantKind    string
	}{
		{name: "success_counts_for_the_model", model: "m", wantKeys: "sk-alice", wantReports: []string{"model:m=ok"}},
		{name: "500_counts_against_the_model", model: "m", status: map[string][]int{"sk-alice": {500}}, wantKeys: "sk-alice",
			wantReports: []string{"model:m=fail"}, wantKind: "status_5xx"},
		{name: "client_error_counts_for_the_model", model: "m", status: map[string][]int{"sk-alice": {400}}, wantKeys: "sk-alice",
			wantReports: []string{"model:m=ok"}, wantKind: "status_4xx"},
		{name: "callers_own_429_is_not_the_models", model: "m", status: map[string][]int{"sk-alice": {429, 429, 429}},
			wantKeys: "sk-alice sk-alice sk-alice", wantKind: "status_4xx"},
		{name: "unlisted_model_has_no_breaker", model: "made-up", status: map[string][]int{"sk-alice": {500}}, wantKeys: "sk-alice", wantKind: "status_5xx"},
		{name: "open_model_breaker_fails_fast", model: "m", blocked: []string{"model:m"}, wantKind: KindBreakerOpen},
		{name: "key_429_counts_against_the_key", pool: []string{"sk-a", "sk-b"}, model: "m", status: map[string][]int{"sk-a": {429}},
			wantKeys: "sk-a sk-b", wantReports: []string{fa + "=fail", fb + "=ok", "model:m=ok"}},
		{name: "pool_429_exhausted_counts_against_the_model", pool: []string{"sk-a"}, model: "m", status: map[string][]int{"sk-a": {429, 429, 429}},
			wantKeys: "sk-a sk-a sk-a", wantReports: []string{fa + "=fail", fa + "=fail", fa + "=fail", "model:m=fail"}, wantKind: "status_4xx"},
		{name: "open_key_breaker_is_passed_over", pool: []string{"sk-a", "sk-b"}, blocked: []string{fa}, wantKeys: "sk-b",
			wantReports: []string{fb + "=ok"}},
		{name: "every_key_open_still_asks_the_platform", pool: []string{"sk-a", "sk-b"}, blocked: []string{fa, fb}, wantKeys: "sk-a",
			wantReports: []string{fa + "=ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHealth{blocked: map[string]bool{}}
			for _, b := range tt.blocked {
				h.blocked[b] = true
			}
			env := newGatewayEnvWith(t, h, []string{"m"}, tt.pool...)
			for k, v := range tt.status {
				env.fake.status[k] = v
			}
			body := []byte(`{"model":"` + tt.model + `","input":"hi"}`)
			resp, cancel, f := env.gw.Open(context.Background(), &Call{Principal: alice, Body: body})
			if f == nil {
				resp.Body.Close()
				cancel()
			}
			if got := strings.Join(env.fake.keys(), " "); got != tt.wantKeys {
				t.Errorf("platform saw keys %q, want %q", got, tt.wantKeys)
			}
			if got := h.got(); !slices.Equal(got, tt.wantReports) {
				t.Errorf("reports %q, want %q", got, tt.wantReports)
			}
			kind := ""
			if f != nil {
				kind = f.Kind
			}
			if kind != tt.wantKind {
				t.Fatalf("failure kind %q, want %q", kind, tt.wantKind)
			}
			if kind == KindBreakerOpen && (f.Status != http.StatusServiceUnavailable || !strings.Contains(string(f.Body), "model_unavailable")) {
				t.Errorf("breaker refusal: %d %s", f.Status, f.Body)
			}
		})
	}
}

// A client that left tells the model's breaker nothing.
func TestClientGoneIsNotReported(t *testing.T) {
	h := &fakeHealth{blocked: map[string]bool{}}
	env := newGatewayEnvWith(t, h, []string{"m"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, f := env.gw.Open(ctx, &Call{Principal: alice, Body: []byte(`{"model":"m"}`)})
	if f == nil || !f.ClientGone {
		t.Fatalf("failure %+v, want the client gone", f)
	}
	if got := h.got(); len(got) != 0 {
		t.Fatalf("reports %q for a client that left", got)
	}
}

// BenchmarkBreakersOnSuccess is what breakers add to a successful call through a pool of
// three keys: naming and asking the model's breaker, asking the picked key's, and
// reporting both outcomes. Issue 27 allows under 1 µs.
func BenchmarkBreakersOnSuccess(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		var h Health
		if on {
			name = "on"
			h = breaker.New(breaker.Options{Settings: breaker.Settings{Failures: 5, Window: time.Minute, Cooldown: 30 * time.Second}})
		}
		b.Run(name, func(b *testing.B) {
			cfg := &config.Config{Models: []config.Model{{ID: "gpt-4o-mini", Upstream: "sim-chat"}},
				Teams: []config.Team{{Name: "alpha", UpstreamAPIKeys: []string{"sk-a", "sk-b", "sk-c"}, Keys: []config.Key{{Name: "alpha-1"}}}}}
			g := New(Deps{Health: h}, cfg, true)
			pool := g.Pool("alpha")
			call := Call{Principal: alice, Model: "sim-chat"}
			ok := &http.Response{StatusCode: http.StatusOK}
			b.ReportAllocs()
			for b.Loop() {
				model := g.modelBreaker(&call)
				if model != "" && !g.health.Allow(model) {
					b.Fatal("refused")
				}
				k, _ := pool.pick(nil)
				pool.report(k, ok, pool.observe(k, ok, nil))
				if failed, judged := ModelFailed(nil); model != "" && judged {
					g.health.Report(model, failed)
				}
			}
		})
	}
}

// A key lent for a streamed upload (the sidecar's lease) reports the platform's answer to the
// key's breaker as a gateway call does: a 429 or 401 against it, any other answer for it, a
// transport error nothing. A half-open breaker that let the lease through as its probe would
// otherwise wait for a report that never comes.
func TestLeaseReportsToKeyBreaker(t *testing.T) {
	fa := KeyBreaker(Fingerprint("sk-a"))
	for _, tc := range []struct {
		name string
		resp *http.Response
		want []string
	}{
		{"ok", &http.Response{StatusCode: http.StatusOK}, []string{fa + "=ok"}},
		{"limited", &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}, []string{fa + "=fail"}},
		{"rejected", &http.Response{StatusCode: http.StatusUnauthorized}, []string{fa + "=fail"}},
		{"transport_error", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHealth{blocked: map[string]bool{}}
			env := newGatewayEnvWith(t, h, []string{"m"}, "sk-a")
			_, lease := env.gw.Lender(alice, Trail{}).Lease(context.Background())
			var err error
			if tc.resp == nil {
				err = context.DeadlineExceeded
			}
			lease.Done(tc.resp, err)
			if got := h.got(); !slices.Equal(got, tc.want) {
				t.Fatalf("reports %q, want %q", got, tc.want)
			}
		})
	}
}

package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/redisconn/redistest"
)

type listed struct {
	Keys []struct {
		ID, Team, Name, Source string
		CreatedAt              *time.Time `json:"created_at"`
		LastUsedAt             *time.Time `json:"last_used_at"`
		ExpiresAt              *time.Time `json:"expires_at"`
		Limits                 map[string]float64
		Usage                  *struct {
			DayRequests int64 `json:"day_requests"`
		}
	}
}

func (r *replica) list(t testing.TB, query string) listed {
	t.Helper()
	return getAdmin[listed](t, r, "/admin/keys"+query)
}

func TestIssuedKeyWorksAtOnceAndRevokes(t *testing.T) {
	r := startReplica(t, envOptions{})
	id, secret := r.issue(t, "alpha", "ci-bot", map[string]any{"limits": map[string]any{"requests_per_minute": 50}})
	if !strings.HasPrefix(secret, "mg-") || len(secret) < 40 {
		t.Fatalf("secret %q: want mg- and 32 random bytes", secret)
	}
	if got := r.chat(t, secret); got != http.StatusOK {
		t.Fatalf("chat with the new key: %d, want 200 at once", got)
	}

	status, _, body := r.do(t, "GET", "/admin/keys", adminKey, nil)
	if status != 200 {
		t.Fatalf("list: %d", status)
	}
	for _, leak := range []string{secret, alphaKey, betaKey, "sha256"} {
		if strings.Contains(string(body), leak) {
			t.Fatalf("the key list shows %q: %s", leak, body)
		}
	}
	l := decode[listed](t, body)
	var sources []string
	for _, k := range l.Keys {
		sources = append(sources, k.Team+"/"+k.Name+"/"+k.Source)
		if k.ID == id {
			if k.CreatedAt == nil || k.LastUsedAt == nil || k.ExpiresAt != nil {
				t.Errorf("issued key times: created %v last used %v expires %v", k.CreatedAt, k.LastUsedAt, k.ExpiresAt)
			}
			if k.Limits["requests_per_minute"] != 50 {
				t.Errorf("limits %v", k.Limits)
			}
			if k.Usage == nil || k.Usage.DayRequests != 1 {
				t.Errorf("usage %+v, want one request today", k.Usage)
			}
		}
	}
	if want := "alpha/alpha-cfg/config alpha/ci-bot/api beta/beta-cfg/config"; strings.Join(sources, " ") != want {
		t.Fatalf("listed %v, want %s", sources, want)
	}
	if l := r.list(t, "?team=beta"); len(l.Keys) != 1 || l.Keys[0].Name != "beta-cfg" {
		t.Fatalf("?team=beta listed %+v", l.Keys)
	}

	if status, _, b := r.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != 200 {
		t.Fatalf("revoke: %d %s", status, b)
	} else if want := `{"id":"` + id + `","name":"ci-bot","revoked":true,"team":"alpha"}`; strings.TrimSpace(string(b)) != want {
		// The answer names what went, so the CLI can say it (issue 45).
		t.Errorf("revoke answered %s, want %s", b, want)
	}
	if got := r.chat(t, secret); got != http.StatusUnauthorized {
		t.Fatalf("chat with the revoked key: %d, want 401", got)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != 404 {
		t.Fatalf("second revoke: %d, want 404", status)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/config:alpha:alpha-cfg", adminKey, nil); status != 409 {
		t.Fatalf("revoking a config key: %d, want 409", status)
	}
	if got := r.chat(t, alphaKey); got != 200 {
		t.Fatalf("config key after the refused revoke: %d", got)
	}
	// The name is free again once its key is revoked.
	r.issue(t, "alpha", "ci-bot", nil)
}

func TestIssuedKeyLimitsApply(t *testing.T) {
	r := startReplica(t, envOptions{})
	_, secret := r.issue(t, "beta", "tiny", map[string]any{"limits": map[string]any{"requests_per_minute": 1}})
	if got := r.chat(t, secret); got != 200 {
		t.Fatalf("first: %d", got)
	}
	if got := r.chat(t, secret); got != http.StatusTooManyRequests {
		t.Fatalf("second within the minute: %d, want 429", got)
	}
	if got := r.chat(t, betaKey); got != 200 {
		t.Fatalf("the team's other key: %d", got)
	}
}

func TestCreateKeyBadInputChangesNothing(t *testing.T) {
	r := startReplica(t, envOptions{})
	r.issue(t, "alpha", "taken", nil)
	past := r.now().Add(-time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, key string
		body      any
		status    int
		code      string
	}{
		{"unknown_team", adminKey, map[string]any{"team": "gamma", "name": "x"}, 404, "unknown_team"},
		{"duplicate_issued_name", adminKey, map[string]any{"team": "alpha", "name": "taken"}, 409, "duplicate_name"},
		{"duplicate_config_name", adminKey, map[string]any{"team": "alpha", "name": "alpha-cfg"}, 409, "duplicate_name"},
		{"malformed_json", adminKey, `{"team": "alpha", "name": `, 400, "invalid_json"},
		{"not_an_object", adminKey, `["alpha"]`, 400, "invalid_json"},
		{"trailing_data", adminKey, `{"team":"alpha","name":"a"} {}`, 400, "invalid_json"},
		{"unknown_field", adminKey, map[string]any{"team": "alpha", "name": "x", "secret": "mine"}, 400, "invalid_json"},
		{"wrong_type", adminKey, map[string]any{"team": "alpha", "name": 7}, 400, "invalid_json"},
		{"missing_team", adminKey, map[string]any{"name": "x"}, 400, "missing_required_parameter"},
		{"missing_name", adminKey, map[string]any{"team": "alpha"}, 400, "missing_required_parameter"},
		{"bad_name", adminKey, map[string]any{"team": "alpha", "name": "a/b"}, 400, "invalid_name"},
		{"negative_limit", adminKey, map[string]any{"team": "alpha", "name": "x", "limits": map[string]any{"tokens_per_day": -1}}, 400, "invalid_limits"},
		{"expiry_in_the_past", adminKey, map[string]any{"team": "alpha", "name": "x", "expires_at": past}, 400, "invalid_expiry"},
		{"expiry_past_2262", adminKey, map[string]any{"team": "alpha", "name": "x", "expires_at": "2300-01-01T00:00:00Z"}, 400, "invalid_expiry"},
		{"expiry_year_9999", adminKey, map[string]any{"team": "alpha", "name": "x", "expires_at": "9999-12-31T23:59:59Z"}, 400, "invalid_expiry"},
		{"expiry_past_100_years", adminKey, map[string]any{"team": "alpha", "name": "x", "expires_at": time.Now().AddDate(101, 0, 0).UTC().Format(time.RFC3339)}, 400, "invalid_expiry"},
		{"bad_expiry", adminKey, map[string]any{"team": "alpha", "name": "x", "expires_at": "tomorrow"}, 400, "invalid_json"},
		{"team_key", alphaKey, map[string]any{"team": "alpha", "name": "x"}, 403, "permission_denied"},
		{"no_key", "", map[string]any{"team": "alpha", "name": "x"}, 401, "invalid_api_key"},
		{"wrong_key", "mg-not-a-key", map[string]any{"team": "alpha", "name": "x"}, 401, "invalid_api_key"},
	}
	before := len(r.list(t, "").Keys)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, b := r.do(t, "POST", "/admin/keys", c.key, c.body)
			if status != c.status || !strings.Contains(string(b), `"code":"`+c.code+`"`) {
				t.Fatalf("%d %s, want %d %s", status, b, c.status, c.code)
			}
		})
	}
	if after := len(r.list(t, "").Keys); after != before {
		t.Fatalf("bad requests changed the key list: %d keys, was %d", after, before)
	}
}

func TestKeyRoutesNeedAdmin(t *testing.T) {
	r := startReplica(t, envOptions{})
	id, _ := r.issue(t, "alpha", "victim", nil)
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/keys"}, {"DELETE", "/admin/keys/" + id}, {"GET", "/admin/teams"}, {"GET", "/admin/usage/history"},
	} {
		for key, want := range map[string]int{alphaKey: 403, "": 401, "mg-wrong": 401} {
			if status, _, b := r.do(t, c.method, c.path, key, nil); status != want {
				t.Errorf("%s %s with %q: %d %s, want %d", c.method, c.path, key, status, b, want)
			}
		}
	}
	if status, _, _ := r.do(t, "GET", "/admin/keys?team=nobody", adminKey, nil); status != 404 {
		t.Errorf("?team=nobody: %d, want 404", status)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/key_0000", adminKey, nil); status != 404 {
		t.Errorf("unknown id: %d, want 404", status)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/config:alpha:nope", adminKey, nil); status != 404 {
		t.Errorf("unknown config id: %d, want 404", status)
	}
	if len(r.list(t, "?team=alpha").Keys) != 2 {
		t.Errorf("the issued key did not survive the refused revokes")
	}
}

func TestIssuedKeyExpires(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	r := startReplica(t, envOptions{now: now})
	exp := now().Add(time.Hour)
	id, secret := r.issue(t, "alpha", "temp", map[string]any{"expires_at": exp.Format(time.RFC3339)})
	if got := r.chat(t, secret); got != 200 {
		t.Fatalf("before expiry: %d", got)
	}
	for _, k := range r.list(t, "").Keys {
		if k.ID == id && (k.ExpiresAt == nil || !k.ExpiresAt.Equal(exp)) {
			t.Fatalf("listed expiry %v, want %v", k.ExpiresAt, exp)
		}
	}
	clock.Add(int64(time.Hour))
	if got := r.chat(t, secret); got != http.StatusUnauthorized {
		t.Fatalf("at expiry: %d, want 401", got)
	}
}

// A key issued to last for decades works, is listed and keeps its name: its expiry is
// neither wrapped (UnixNano past 2262) nor saturated into "already expired" on the way to the
// store or the authenticator.
func TestIssuedKeyFarExpiry(t *testing.T) {
	r := startReplica(t, envOptions{})
	exp := time.Now().AddDate(99, 0, 0).UTC().Truncate(time.Second)
	id, secret := r.issue(t, "alpha", "decades", map[string]any{"expires_at": exp.Format(time.RFC3339)})
	if got := r.chat(t, secret); got != 200 {
		t.Fatalf("a key expiring in 99 years: %d", got)
	}
	found := false
	for _, k := range r.list(t, "").Keys {
		found = found || k.ID == id && k.ExpiresAt != nil && k.ExpiresAt.Equal(exp)
	}
	if !found {
		t.Fatal("the key is not listed with its expiry")
	}
	if status, _, b := r.do(t, "POST", "/admin/keys", adminKey, map[string]any{"team": "alpha", "name": "decades"}); status != http.StatusConflict {
		t.Fatalf("the name was issued again: %d %s", status, b)
	}
}

func TestKeysSurviveRestart(t *testing.T) {
	dir, sim := t.TempDir(), newSim(t)
	r := startReplica(t, envOptions{dataDir: dir, sim: sim})
	keepID, keep := r.issue(t, "alpha", "keep", nil)
	dropID, drop := r.issue(t, "beta", "drop", nil)
	if got := r.chat(t, keep); got != 200 {
		t.Fatalf("before restart: %d", got)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/"+dropID, adminKey, nil); status != 200 {
		t.Fatal("revoke")
	}
	r.stop()

	r2 := startReplica(t, envOptions{dataDir: dir, sim: sim})
	ids := ""
	for _, k := range r2.list(t, "").Keys {
		ids += k.ID + " "
		if k.ID == keepID && k.LastUsedAt == nil {
			t.Error("the kept key's last use was lost in the restart")
		}
	}
	if !strings.Contains(ids, keepID) || strings.Contains(ids, dropID) {
		t.Fatalf("after restart listed %s", ids)
	}
	if got := r2.chat(t, keep); got != 200 {
		t.Fatalf("kept key after restart: %d", got)
	}
	if got := r2.chat(t, drop); got != 401 {
		t.Fatalf("revoked key after restart: %d", got)
	}
}

func TestRevocationSeenBySecondReplica(t *testing.T) {
	addr := redistest.Start(t).Addr
	url := fmt.Sprintf("redis://%s/0", addr)
	sim := newSim(t)
	a := startReplica(t, envOptions{storeURL: url, sim: sim})
	b := startReplica(t, envOptions{storeURL: url, sim: sim})

	id, secret := a.issue(t, "alpha", "shared", nil)
	waitFor(t, time.Second, "the key to work on the second replica", func() bool { return b.chat(t, secret) == 200 })
	if status, _, body := b.do(t, "POST", "/admin/keys", adminKey, map[string]any{"team": "alpha", "name": "shared"}); status != 409 {
		t.Fatalf("same name through the other replica: %d %s", status, body)
	}
	if status, _, _ := a.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != 200 {
		t.Fatal("revoke")
	}
	start := time.Now()
	waitFor(t, time.Second, "the revocation to reach the second replica", func() bool { return b.chat(t, secret) == 401 })
	t.Logf("revocation seen by the second replica after %v", time.Since(start).Round(time.Millisecond))
}

// waitFor polls cond until it holds or within has passed. Polling a real replica is the
// point here: the claim under test is about wall time across processes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	apitest.WaitFor(t, within, what, cond)
}

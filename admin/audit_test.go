package admin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/apitest"
	"modelgate/redisconn/redistest"
)

type auditPage struct {
	Entries []struct {
		ID, Actor, Action, Target string
		Time                      string
		Details                   map[string]string
	}
	NextBefore *string `json:"next_before"`
}

func (r *replica) audit(t testing.TB, query string) auditPage {
	t.Helper()
	return getAdmin[auditPage](t, r, "/admin/audit"+query)
}

// summary is a page's entries as "action target", newest first.
func (p auditPage) summary() string {
	var s []string
	for _, e := range p.Entries {
		s = append(s, e.Action+" "+e.Target)
	}
	return strings.Join(s, ", ")
}

func fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// TestAuditRecordsKeyActions: issuing and revoking a key each leave one entry naming the
// admin key by fingerprint; refused actions leave none.
func TestAuditRecordsKeyActions(t *testing.T) {
	r := startReplica(t, envOptions{})
	if got := r.audit(t, ""); len(got.Entries) != 0 || got.NextBefore != nil {
		t.Fatalf("a new log: %+v", got)
	}
	id, _ := r.issue(t, "alpha", "ci-bot", map[string]any{"models": []string{"sim-chat"},
		"limits": map[string]any{"spend_per_day": 2.5}, "expires_at": "2100-01-02T00:00:00Z"})
	// Refused: a duplicate name, an unknown team, a config key, an unknown id.
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/admin/keys", map[string]any{"team": "alpha", "name": "ci-bot"}},
		{"POST", "/admin/keys", map[string]any{"team": "nobody", "name": "x"}},
		{"DELETE", "/admin/keys/config:alpha:alpha-cfg", nil},
		{"DELETE", "/admin/keys/key_0000000000000000", nil},
	} {
		if status, _, b := r.do(t, req.method, req.path, adminKey, req.body); status < 400 {
			t.Fatalf("%s %s: %d %s, want a refusal", req.method, req.path, status, b)
		}
	}
	if status, _, b := r.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != http.StatusOK {
		t.Fatalf("revoke: %d %s", status, b)
	}
	got := r.audit(t, "")
	if s := got.summary(); s != "key.revoked alpha/ci-bot, key.issued alpha/ci-bot" {
		t.Fatalf("audit log: %s", s)
	}
	for _, e := range got.Entries {
		if e.Actor != "admin:"+fingerprint(adminKey) || e.Details["id"] != id || e.Time == "" || !strings.HasPrefix(e.ID, "aud_") {
			t.Errorf("entry %+v", e)
		}
	}
	issued := got.Entries[1].Details
	if issued["models"] != "sim-chat" || issued["limits"] != "spend_per_day=2.5" || issued["expires_at"] != "2100-01-02T00:00:00Z" {
		t.Errorf("issue details %v", issued)
	}
}

// TestAuditHoldsNoSecret issues a key and looks for its secret, the secret's hash and the
// admin key in the log as the API shows it and as the store holds it.
func TestAuditHoldsNoSecret(t *testing.T) {
	r := startReplica(t, envOptions{})
	id, secret := r.issue(t, "alpha", "leak-check", nil)
	r.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil)
	_, _, body := r.do(t, "GET", "/admin/audit", adminKey, nil)
	var stored strings.Builder
	err := r.st.Scan(context.Background(), "audit", "", func(_ string, v []byte) error {
		stored.Write(v)
		return nil
	})
	if err != nil || stored.Len() == 0 {
		t.Fatalf("reading the audit bucket: %v (%d bytes)", err, stored.Len())
	}
	sum := sha256.Sum256([]byte(secret))
	for _, leak := range []string{secret, secret[3:20], hex.EncodeToString(sum[:]), adminKey} {
		for where, text := range map[string]string{"the API": string(body), "the store": stored.String()} {
			if strings.Contains(text, leak) {
				t.Errorf("%s shows %q: %s", where, leak, text)
			}
		}
	}
}

// TestAuditSurvivesRestart: the entries are in the bbolt file a restarted modelgate reopens.
func TestAuditSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	sim := newSim(t)
	first := startReplica(t, envOptions{dataDir: dir, sim: sim})
	first.issue(t, "beta", "before-restart", nil)
	first.stop()

	second := startReplica(t, envOptions{dataDir: dir, sim: sim})
	second.issue(t, "beta", "after-restart", nil)
	if s := second.audit(t, "").summary(); s != "key.issued beta/after-restart, key.issued beta/before-restart" {
		t.Fatalf("after a restart: %s", s)
	}
}

// TestAuditOneLogForReplicas: two replicas on one Redis write one log and read it alike.
func TestAuditOneLogForReplicas(t *testing.T) {
	url := fmt.Sprintf("redis://%s/0", redistest.Start(t).Addr)
	sim := newSim(t)
	a := startReplica(t, envOptions{storeURL: url, sim: sim})
	b := startReplica(t, envOptions{storeURL: url, sim: sim})
	id, _ := a.issue(t, "alpha", "shared", nil)
	b.issue(t, "beta", "other", nil)
	if status, _, body := b.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != http.StatusOK {
		t.Fatalf("revoke through the second replica: %d %s", status, body)
	}
	want := "key.revoked alpha/shared, key.issued beta/other, key.issued alpha/shared"
	for name, r := range map[string]*replica{"a": a, "b": b} {
		if s := r.audit(t, "").summary(); s != want {
			t.Errorf("replica %s reads %s", name, s)
		}
	}
}

func TestAuditPaging(t *testing.T) {
	r := startReplica(t, envOptions{})
	for i := range 5 {
		r.issue(t, "alpha", fmt.Sprintf("k%d", i), nil)
	}
	var all []string
	query := "?limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		p := r.audit(t, query)
		if len(p.Entries) > 2 {
			t.Fatalf("%d entries on a page of 2", len(p.Entries))
		}
		for _, e := range p.Entries {
			all = append(all, e.Target)
		}
		if p.NextBefore == nil {
			break
		}
		query = "?limit=2&before=" + *p.NextBefore
	}
	if got := strings.Join(all, " "); got != "alpha/k4 alpha/k3 alpha/k2 alpha/k1 alpha/k0" {
		t.Fatalf("paged: %s", got)
	}
	if p := r.audit(t, ""); len(p.Entries) != 5 || p.NextBefore != nil {
		t.Fatalf("default page: %d entries, next %v", len(p.Entries), p.NextBefore)
	}
	for _, tc := range []struct{ query, param string }{
		{"?limit=0", "limit"}, {"?limit=501", "limit"}, {"?limit=x", "limit"},
		{"?before=aud_1", "before"}, {"?before=key_0000000000000001", "before"},
	} {
		status, _, b := r.do(t, "GET", "/admin/audit"+tc.query, adminKey, nil)
		if status != http.StatusBadRequest || !strings.Contains(string(b), `"param":"`+tc.param+`"`) {
			t.Errorf("%s: %d %s", tc.query, status, b)
		}
	}
}

// TestAuditIsReadOnly: the log is append-only from the API's side. Every method but GET is
// refused on the log and on an entry's path, through the gateway and by the admin handler
// on its own, and the log is unchanged after.
func TestAuditIsReadOnly(t *testing.T) {
	r := startReplica(t, envOptions{})
	r.issue(t, "alpha", "keep", nil)
	before := r.audit(t, "").summary()
	entryID := r.audit(t, "").Entries[0].ID
	direct := httptest.NewServer(r.api)
	t.Cleanup(direct.Close)
	for _, base := range []string{r.front.URL, direct.URL} {
		for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			for _, path := range []string{"/admin/audit", "/admin/audit/" + entryID} {
				status, _, b := apitest.Do(t, method, base+path, adminKey, strings.NewReader(`{"entries":[]}`))
				if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
					t.Errorf("%s %s%s: %d %s, want 404 or 405", method, base, path, status, b)
				}
			}
		}
	}
	if after := r.audit(t, "").summary(); after != before {
		t.Fatalf("the log changed: %s, was %s", after, before)
	}
	// Only admin keys read it.
	for _, key := range []string{alphaKey, "mg-nobody-at-all", ""} {
		if status, _, b := r.do(t, "GET", "/admin/audit", key, nil); status != http.StatusUnauthorized && status != http.StatusForbidden {
			t.Errorf("GET /admin/audit with %q: %d %s", key, status, b)
		}
	}
}

package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/admin"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/store"
)

// fuzzAPI is the admin API alone over a bbolt store, without a proxy in front.
func fuzzAPI(f *testing.F) (*admin.API, store.Store) {
	f.Helper()
	cfg, err := config.Parse([]byte(testYAML), "fuzz.yaml", func(string) (string, bool) { return "http://127.0.0.1:1", true })
	if err != nil {
		f.Fatal(err)
	}
	authn, err := auth.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	st, err := store.OpenBolt(f.TempDir(), store.BoltOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	issued := auth.NewIssued(nil)
	authn.UseIssued(issued)
	api, err := admin.New(admin.Deps{Store: st, Issued: issued, History: billing.NewRecorder(nil, 0, nil, nil),
		State: func() (*config.Config, *auth.Authenticator) { return cfg, authn }})
	if err != nil {
		f.Fatal(err)
	}
	return api, st
}

// asAdmin serves req on api with the admin key and returns what api answered.
func asAdmin(api *admin.API, req *http.Request) *httptest.ResponseRecorder {
	req.Header.Set("Authorization", "Bearer "+adminKey)
	w := httptest.NewRecorder()
	api.ServeHTTP(w, req)
	return w
}

func countKeys(t *testing.T, api *admin.API) int {
	w := asAdmin(api, httptest.NewRequest("GET", "/admin/keys", nil))
	if w.Code != 200 {
		t.Fatalf("list: %d", w.Code)
	}
	return strings.Count(w.Body.String(), `"id":`)
}

// FuzzCreateKey: any body gets an answer below 500, and a refused one changes nothing.
func FuzzCreateKey(f *testing.F) {
	for _, s := range []string{
		`{"team":"alpha","name":"k1"}`,
		`{"team":"alpha","name":"k2","limits":{"spend_per_day":1.5,"requests_per_minute":3},"expires_at":"2099-01-01T00:00:00Z"}`,
		`{"team":"gamma","name":"x"}`, `{"team":"alpha","name":"alpha-cfg"}`, `{"team":"alpha"`, `[]`, `null`, ``,
		`{"team":"alpha","name":"a","limits":{"tokens_per_day":-1}}`, `{"team":"alpha","name":"a","expires_at":"1999-01-01T00:00:00Z"}`,
		`{"team":"alpha","name":"m1","models":["sim-chat"]}`, `{"team":"alpha","name":"m2","models":["nope"]}`,
		`{"team":"alpha","name":"m3","models":["sim-chat","sim-chat"]}`, `{"team":"alpha","name":"m4","models":[""]}`,
		`{"team":"alpha","name":"m5","models":[]}`, `{"team":"alpha","name":"m6","models":null}`, `{"team":"alpha","name":"m7","models":"sim-chat"}`,
	} {
		f.Add([]byte(s))
	}
	api, _ := fuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := countKeys(t, api)
		w := asAdmin(api, httptest.NewRequest("POST", "/admin/keys", strings.NewReader(string(body))))
		after := countKeys(t, api)
		switch {
		case w.Code >= 500:
			t.Fatalf("%d for %q: %s", w.Code, body, w.Body.String())
		case w.Code == http.StatusCreated && after != before+1:
			t.Fatalf("201 but %d keys, was %d", after, before)
		case w.Code != http.StatusCreated && after != before:
			t.Fatalf("%d changed the key count %d -> %d", w.Code, before, after)
		}
	})
}

// FuzzHistoryQuery: any query string gets 200 or 400, never a 5xx.
func FuzzHistoryQuery(f *testing.F) {
	for _, s := range []string{"", "from=2026-01-01&to=2026-01-31", "group_by=team,key", "group_by=", "from=x", "to=2026-02-30", "group_by=model&group_by=team", "granularity=hour", "granularity=hour&from=2026-01-01&to=2026-01-02"} {
		f.Add(s)
	}
	api, _ := fuzzAPI(f)
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "/admin/usage/history", nil)
		req.URL.RawQuery = query // the fuzzed query as is, not parsed on the way
		w := asAdmin(api, req)
		if w.Code != 200 && w.Code != 400 {
			t.Fatalf("%q: %d %s", query, w.Code, w.Body.String())
		}
	})
}

// teamsState is GET /admin/teams of api without its usage figures: what a write may change.
func teamsState(t *testing.T, api *admin.API) (int, string) {
	w := asAdmin(api, httptest.NewRequest("GET", "/admin/teams", nil))
	if w.Code != 200 {
		t.Fatalf("list: %d", w.Code)
	}
	var l struct{ Teams []map[string]any }
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	for _, tm := range l.Teams {
		delete(tm, "usage")
	}
	b, _ := json.Marshal(l.Teams)
	return len(l.Teams), string(b)
}

// FuzzTeamWrites: any body POSTed or PATCHed gets an answer below 500; a refused one changes
// no team, a created one adds exactly one.
func FuzzTeamWrites(f *testing.F) {
	for _, s := range []string{`{"name":"t1"}`, `{"name":"t2","models":["sim-chat"],"limits":{"spend_per_day":2,"on_budget_exceeded":"clamp"}}`,
		`{"name":"alpha"}`, `{"name":"bad/name"}`, `{"limits":{"tokens_per_day":-1}}`, `{"limits":{"spend_per_day":null}}`,
		`{"models":["nope"]}`, `{"end_user_limits":{"requests_per_minute":3}}`, `{"name":"fixed"}`, `{"x":1}`, `[]`, `null`, ``} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	api, _ := fuzzAPI(f)
	w := asAdmin(api, httptest.NewRequest("POST", "/admin/teams", strings.NewReader(`{"name":"fixed","limits":{"requests_per_minute":5}}`)))
	if w.Code != http.StatusCreated {
		f.Fatalf("setup: %d %s", w.Code, w.Body.String())
	}
	f.Fuzz(func(t *testing.T, body []byte, create bool) {
		n, before := teamsState(t, api)
		method, path, ok := "PATCH", "/admin/teams/fixed", http.StatusOK
		if create {
			method, path, ok = "POST", "/admin/teams", http.StatusCreated
		}
		w := asAdmin(api, httptest.NewRequest(method, path, strings.NewReader(string(body))))
		m, after := teamsState(t, api)
		switch {
		case w.Code >= 500:
			t.Fatalf("%d for %q: %s", w.Code, body, w.Body.String())
		case w.Code != ok && after != before:
			t.Fatalf("%d %s changed the teams", w.Code, w.Body.String())
		case create && w.Code == ok && m != n+1:
			t.Fatalf("201 but %d teams, was %d", m, n)
		case !create && m != n:
			t.Fatalf("a PATCH changed the number of teams %d -> %d", n, m)
		}
	})
}

package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/admin"
)

// teamsState is GET /admin/teams of api without its usage figures: what a write may change.
func teamsState(t *testing.T, api *admin.API) (int, string) {
	req := httptest.NewRequest("GET", "/admin/teams", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	w := httptest.NewRecorder()
	api.ServeHTTP(w, req)
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
	req := httptest.NewRequest("POST", "/admin/teams", strings.NewReader(`{"name":"fixed","limits":{"requests_per_minute":5}}`))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	w := httptest.NewRecorder()
	api.ServeHTTP(w, req)
	if w.Code != http.StatusCreated {
		f.Fatalf("setup: %d %s", w.Code, w.Body.String())
	}
	f.Fuzz(func(t *testing.T, body []byte, create bool) {
		n, before := teamsState(t, api)
		method, path, ok := "PATCH", "/admin/teams/fixed", http.StatusOK
		if create {
			method, path, ok = "POST", "/admin/teams", http.StatusCreated
		}
		req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
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

package admin_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// teamsFront is the front the teams form's browser test talks to. The team-writing routes
// (POST /admin/teams, PATCH /admin/teams/{name}) are built on another branch: when the
// replica answers them (a probe POST with an empty body is refused with 400, not 404 or
// 405), the test runs against the real API as it is. Until then a small stand-in of those
// two routes sits in front of the replica, keeps the teams made through it in memory, and
// adds them (with "source") to GET /admin/teams; every other request goes to the replica.
func teamsFront(t *testing.T, r *replica) (url string, stub bool) {
	t.Helper()
	status, _, _ := r.do(t, "POST", "/admin/teams", adminKey, map[string]any{})
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		return r.front.URL, false
	}
	s := &teamsStub{next: r.srv.Handler(), teams: map[string]map[string]any{}}
	front := httptest.NewServer(s)
	t.Cleanup(front.Close)
	return front.URL, true
}

type teamsStub struct {
	next  http.Handler
	mu    sync.Mutex
	teams map[string]map[string]any // made through the stub, in the API's shape
	order []string
}

func (s *teamsStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, isPatch := strings.CutPrefix(r.URL.Path, "/admin/teams/")
	switch {
	case r.URL.Path == "/admin/teams" && r.Method == http.MethodGet:
		s.list(w, r)
	case r.URL.Path == "/admin/teams" && r.Method == http.MethodPost:
		s.create(w, r)
	case isPatch && r.Method == http.MethodPatch:
		s.patch(w, r, name)
	default:
		s.next.ServeHTTP(w, r)
	}
}

func stubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
}

// list is the replica's answer with each team marked "config", then the stub's teams.
func (s *teamsStub) list(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	s.next.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		_, _ = io.Copy(w, rec.Body)
		return
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		stubError(w, 500, "stub", err.Error())
		return
	}
	teams, _ := out["teams"].([]any)
	for _, t := range teams {
		t.(map[string]any)["source"] = "config"
	}
	s.mu.Lock()
	for _, name := range s.order {
		teams = append(teams, s.teams[name])
	}
	s.mu.Unlock()
	out["teams"] = teams
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *teamsStub) configTeam(r *http.Request, name string) bool {
	rec := httptest.NewRecorder()
	get, _ := http.NewRequest(http.MethodGet, "/admin/teams", nil)
	get.Header = r.Header.Clone()
	s.next.ServeHTTP(rec, get)
	return bytes.Contains(rec.Body.Bytes(), []byte(`"name":"`+name+`"`))
}

func (s *teamsStub) create(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		stubError(w, 400, "invalid_json", "The body is not JSON.")
		return
	}
	name, _ := body["name"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" || s.teams[name] != nil || s.configTeam(r, name) {
		stubError(w, 409, "team_exists", "A team of that name exists.")
		return
	}
	team := map[string]any{"name": name, "source": "api", "mode": "enforce", "models": []any{}, "keys": 0,
		"limits": map[string]any{}, "end_user_limits": map[string]any{},
		"usage": map[string]any{"minute_requests": 0, "day_requests": 0, "day_tokens": 0, "month_requests": 0, "month_tokens": 0, "spend_day": 0, "spend_month": 0}}
	merge(team, body)
	s.teams[name] = team
	s.order = append(s.order, name)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(team)
}

func (s *teamsStub) patch(w http.ResponseWriter, r *http.Request, name string) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		stubError(w, 400, "invalid_json", "The body is not JSON.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	team := s.teams[name]
	if team == nil {
		if s.configTeam(r, name) {
			stubError(w, 409, "config_team", "Team "+name+" is defined in the config file; change it there.")
			return
		}
		stubError(w, 404, "unknown_team", "No team of that name.")
		return
	}
	delete(body, "name")
	merge(team, body)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(team)
}

// merge applies a JSON merge patch (RFC 7396) of patch to doc.
func merge(doc, patch map[string]any) {
	for k, v := range patch {
		switch v := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			sub, ok := doc[k].(map[string]any)
			if !ok {
				sub = map[string]any{}
				doc[k] = sub
			}
			merge(sub, v)
		default:
			doc[k] = v
		}
	}
}

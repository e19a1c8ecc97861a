package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/redisconn/redistest"
)

// teamListed is one team of GET /admin/teams, as far as these tests read it.
type teamListed struct {
	Name, Source, Mode string
	Models             []string
	Keys               int
	Limits             map[string]any
	EndUserLimits      map[string]any `json:"end_user_limits"`
	Usage              map[string]float64
	CreatedAt          *time.Time `json:"created_at"`
}

func (r *replica) teams(t testing.TB) map[string]teamListed {
	t.Helper()
	out := map[string]teamListed{}
	for _, tm := range getAdmin[struct{ Teams []teamListed }](t, r, "/admin/teams").Teams {
		out[tm.Name] = tm
	}
	return out
}

// createTeam creates a runtime team through the API and fails the test unless it is 201.
func (r *replica) createTeam(t testing.TB, body any) teamListed {
	t.Helper()
	status, _, b := r.do(t, "POST", "/admin/teams", adminKey, body)
	if status != http.StatusCreated {
		t.Fatalf("POST /admin/teams: %d %s", status, b)
	}
	return decode[teamListed](t, b)
}

type apiError struct {
	Error struct {
		Message, Type, Code string
		Param               *string
	}
}

// TestTeamBodyRefused: every bad team body gets a 400 (or 409) in the OpenAI shape naming
// what is wrong, and creates nothing.
func TestTeamBodyRefused(t *testing.T) {
	r := startReplica(t, envOptions{})
	r.createTeam(t, map[string]any{"name": "taken"})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, param, msg         string
	}{
		{"not json", "POST", "", `{"name":`, 400, "invalid_json", "", "JSON object"},
		{"not an object", "POST", "", `["x"]`, 400, "invalid_json", "", "JSON object"},
		{"two objects", "POST", "", `{"name":"a"}{"name":"b"}`, 400, "invalid_json", "", "JSON object"},
		{"no name", "POST", "", `{"models":[]}`, 400, "missing_required_parameter", "name", "name"},
		{"empty name", "POST", "", `{"name":""}`, 400, "missing_required_parameter", "name", "name"},
		{"name not a string", "POST", "", `{"name":7}`, 400, "invalid_type", "name", "string"},
		{"name with a slash", "POST", "", `{"name":"a/b"}`, 400, "invalid_name", "name", "1-64"},
		{"name with a colon", "POST", "", `{"name":"a:b"}`, 400, "invalid_name", "name", "1-64"},
		{"name too long", "POST", "", `{"name":"` + strings.Repeat("a", 65) + `"}`, 400, "invalid_name", "name", "1-64"},
		{"name not ascii", "POST", "", `{"name":"é"}`, 400, "invalid_name", "name", "1-64"},
		{"unknown field", "POST", "", `{"name":"n","mode":"shadow"}`, 400, "unknown_parameter", "mode", `"mode"`},
		{"unknown limit", "POST", "", `{"name":"n","limits":{"websocket_connections":2}}`, 400, "unknown_parameter", "limits.websocket_connections", "limits takes"},
		{"unknown end-user limit", "POST", "", `{"name":"n","end_user_limits":{"tokens_per_minute":2}}`, 400, "unknown_parameter", "end_user_limits.tokens_per_minute", "end_user_limits takes"},
		{"repeated field", "POST", "", `{"name":"n","limits":{"spend_per_day":1,"spend_per_day":9}}`, 400, "duplicate_parameter", "spend_per_day", "repeats"},
		{"negative count", "POST", "", `{"name":"n","limits":{"requests_per_minute":-1}}`, 400, "invalid_limits", "limits", "negative"},
		{"negative spend", "POST", "", `{"name":"n","limits":{"spend_per_month":-0.5}}`, 400, "invalid_limits", "limits", "0 to 1e12"},
		{"huge spend", "POST", "", `{"name":"n","limits":{"spend_per_day":1e13}}`, 400, "invalid_limits", "limits", "0 to 1e12"},
		{"fractional count", "POST", "", `{"name":"n","limits":{"tokens_per_day":1.5}}`, 400, "invalid_type", "limits.tokens_per_day", "whole number"},
		{"count as a string", "POST", "", `{"name":"n","limits":{"tokens_per_day":"5"}}`, 400, "invalid_type", "limits.tokens_per_day", "whole number"},
		{"negative end-user limit", "POST", "", `{"name":"n","end_user_limits":{"tokens_per_day":-3}}`, 400, "invalid_limits", "end_user_limits", "negative"},
		{"bad on_budget_exceeded", "POST", "", `{"name":"n","limits":{"on_budget_exceeded":"warn"}}`, 400, "invalid_limits", "limits.on_budget_exceeded", `"clamp"`},
		{"on_budget_exceeded not a string", "POST", "", `{"name":"n","limits":{"on_budget_exceeded":1}}`, 400, "invalid_type", "limits.on_budget_exceeded", `"clamp"`},
		{"limits not an object", "POST", "", `{"name":"n","limits":[1]}`, 400, "invalid_type", "limits", "object"},
		{"model not configured", "POST", "", `{"name":"n","models":["gpt-9"]}`, 400, "invalid_model", "models", `"gpt-9" is not listed under models`},
		{"model twice", "POST", "", `{"name":"n","models":["sim-chat","sim-chat"]}`, 400, "invalid_model", "models", "twice"},
		{"models not a list", "POST", "", `{"name":"n","models":"sim-chat"}`, 400, "invalid_type", "models", "list"},
		{"config team name", "POST", "", `{"name":"alpha"}`, 409, "duplicate_name", "name", "config file"},
		{"runtime team name", "POST", "", `{"name":"taken"}`, 409, "duplicate_name", "name", "already exists"},
		{"patch renames", "PATCH", "/taken", `{"name":"other"}`, 400, "invalid_name", "name", "renamed"},
		{"patch negative", "PATCH", "/taken", `{"limits":{"concurrent_requests":-2}}`, 400, "invalid_limits", "limits", "negative"},
		{"patch unknown field", "PATCH", "/taken", `{"keys":[]}`, 400, "unknown_parameter", "keys", `"keys"`},
		{"patch config team", "PATCH", "/alpha", `{"limits":{"spend_per_day":1}}`, 409, "config_team", "name", "defined in the config file"},
		{"patch unknown team", "PATCH", "/nobody", `{"limits":{"spend_per_day":1}}`, 404, "team_not_found", "name", "No team"},
		{"delete config team", "DELETE", "/beta", ``, 409, "config_team", "name", "defined in the config file"},
		{"delete unknown team", "DELETE", "/nobody", ``, 404, "team_not_found", "name", "No team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := r.do(t, tc.method, "/admin/teams"+tc.path, adminKey, tc.body)
			if status != tc.status {
				t.Fatalf("%d %s, want %d", status, b, tc.status)
			}
			e := decode[apiError](t, b).Error
			param := ""
			if e.Param != nil {
				param = *e.Param
			}
			if e.Code != tc.code || param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("code %q param %q message %q; want %q, %q and a message with %q", e.Code, param, e.Message, tc.code, tc.param, tc.msg)
			}
		})
	}
	got := r.teams(t)
	if len(got) != 3 || got["taken"].Limits["concurrent_requests"] != 0.0 {
		t.Fatalf("refused bodies changed the teams: %+v", got)
	}
	if status, _, _ := r.do(t, "POST", "/admin/teams", alphaKey, `{"name":"by-a-team-key"}`); status != http.StatusForbidden {
		t.Fatalf("a team key creating a team: %d, want 403", status)
	}
}

// TestRuntimeTeamOnTheEmbeddedStore: a team created through the API on the bbolt store gets
// keys that work at once, a budget lowered through PATCH refuses the next call, the team
// and its key survive a restart, and a team with keys is not deleted.
func TestRuntimeTeamOnTheEmbeddedStore(t *testing.T) {
	dir := t.TempDir()
	r := startReplica(t, envOptions{dataDir: dir})
	created := r.createTeam(t, map[string]any{"name": "growth", "models": []string{"sim-chat"},
		"limits":          map[string]any{"requests_per_minute": 100, "spend_per_day": 10, "on_budget_exceeded": "refuse"},
		"end_user_limits": map[string]any{"requests_per_minute": 5}})
	if created.Source != "api" || created.Mode != "enforce" || created.Limits["spend_per_day"] != 10.0 ||
		created.Limits["on_budget_exceeded"] != "refuse" || created.EndUserLimits["requests_per_minute"] != 5.0 ||
		strings.Join(created.Models, ",") != "sim-chat" || created.CreatedAt == nil {
		t.Fatalf("created %+v", created)
	}
	id, secret := r.issue(t, "growth", "bot", nil)
	if got := r.chat(t, secret); got != http.StatusOK {
		t.Fatalf("a call with the runtime team's key: %d, want 200", got)
	}
	// The team's model list applies to its keys.
	if status, _, _ := r.do(t, "POST", "/v1/chat/completions", secret, map[string]any{
		"model": "sim-long", "messages": []map[string]string{{"role": "user", "content": "hi"}}}); status == http.StatusOK {
		t.Fatal("a model off the runtime team's list was served")
	}
	teams := r.teams(t)
	if g := teams["growth"]; g.Source != "api" || g.Keys != 1 || g.Usage["day_requests"] < 1 {
		t.Fatalf("listed %+v", g)
	}
	if a := teams["alpha"]; a.Source != "config" || a.Limits["requests_per_minute"] != 1000.0 {
		t.Fatalf("config team listed %+v", a)
	}

	// Lowered below what one call can cost: the very next call is refused.
	status, _, b := r.do(t, "PATCH", "/admin/teams/growth", adminKey, `{"limits":{"spend_per_day":0.000001}}`)
	if status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", status, b)
	}
	if p := decode[teamListed](t, b); p.Limits["spend_per_day"] != 0.000001 || p.Limits["requests_per_minute"] != 100.0 {
		t.Fatalf("a merge patch keeps the other limits: %+v", p.Limits)
	}
	if got := r.chat(t, secret); got != http.StatusTooManyRequests {
		t.Fatalf("a call past the lowered budget: %d, want 429", got)
	}

	// Restart on the same file: the team, its budget and its key are still there.
	r.stop()
	r = startReplica(t, envOptions{dataDir: dir})
	if got := r.chat(t, secret); got != http.StatusTooManyRequests {
		t.Fatalf("after a restart: %d, want the lowered budget's 429", got)
	}
	if status, _, b := r.do(t, "PATCH", "/admin/teams/growth", adminKey, `{"limits":{"spend_per_day":null}}`); status != http.StatusOK {
		t.Fatalf("PATCH null: %d %s", status, b)
	}
	if got := r.chat(t, secret); got != http.StatusOK {
		t.Fatalf("after the budget was lifted: %d, want 200", got)
	}

	status, _, b = r.do(t, "DELETE", "/admin/teams/growth", adminKey, nil)
	if e := decode[apiError](t, b).Error; status != http.StatusConflict || e.Code != "team_has_keys" {
		t.Fatalf("DELETE a team with a key: %d %s, want 409 team_has_keys", status, b)
	}
	if status, _, b := r.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != http.StatusOK {
		t.Fatalf("revoke: %d %s", status, b)
	}
	if status, _, b := r.do(t, "DELETE", "/admin/teams/growth", adminKey, nil); status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, b)
	}
	if _, ok := r.teams(t)["growth"]; ok {
		t.Fatal("a deleted team is still listed")
	}
	if status, _, _ := r.do(t, "POST", "/admin/keys", adminKey, map[string]any{"team": "growth", "name": "late"}); status != http.StatusNotFound {
		t.Fatalf("a key for a deleted team: %d, want 404", status)
	}

	page := decode[struct {
		Entries []struct {
			Action, Target string
			Details        map[string]string
			Changed        []string
		}
	}](t, func() []byte { _, _, b := r.do(t, "GET", "/admin/audit?limit=10", adminKey, nil); return b }())
	var actions []string
	for _, e := range page.Entries {
		if strings.HasPrefix(e.Action, "team.") {
			actions = append(actions, e.Action+" "+e.Target+" "+strings.Join(e.Changed, ",")+" "+e.Details["limits"])
		}
	}
	want := []string{
		"team.deleted growth  ",
		"team.updated growth limits.spend_per_day requests_per_minute=100,on_budget_exceeded=refuse",
		"team.updated growth limits.spend_per_day requests_per_minute=100,spend_per_day=1e-06,on_budget_exceeded=refuse",
		"team.created growth  requests_per_minute=100,spend_per_day=10,on_budget_exceeded=refuse",
	}
	if strings.Join(actions, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit:\n%s\nwant:\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
	}
}

// TestRuntimeTeamCap: past the cap a team is refused with 409 until one is deleted.
func TestRuntimeTeamCap(t *testing.T) {
	r := startReplica(t, envOptions{maxTeams: 2})
	r.createTeam(t, map[string]any{"name": "one"})
	r.createTeam(t, map[string]any{"name": "two"})
	status, _, b := r.do(t, "POST", "/admin/teams", adminKey, `{"name":"three"}`)
	if e := decode[apiError](t, b).Error; status != http.StatusConflict || e.Code != "too_many_teams" {
		t.Fatalf("a team past the cap: %d %s", status, b)
	}
	if status, _, b := r.do(t, "DELETE", "/admin/teams/one", adminKey, nil); status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, b)
	}
	r.createTeam(t, map[string]any{"name": "three"})
}

// TestRuntimeTeamsAcrossReplicas: two replicas on one Redis. A team created on one is
// served by the other after its poll; a key is not issued through a replica whose memory
// still holds a team another replica deleted (it asks the store).
func TestRuntimeTeamsAcrossReplicas(t *testing.T) {
	url := fmt.Sprintf("redis://%s/0", redistest.Start(t).Addr)
	sim := newSim(t)
	a := startReplica(t, envOptions{storeURL: url, sim: sim})
	b := startReplica(t, envOptions{storeURL: url, sim: sim})
	a.createTeam(t, map[string]any{"name": "growth"})
	_, secret := a.issue(t, "growth", "bot", nil)
	deadline := time.Now().Add(15 * time.Second)
	for b.chat(t, secret) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the other replica never served the runtime team's key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := b.teams(t)["growth"]; got.Source != "api" || got.Keys != 1 {
		t.Fatalf("the other replica lists %+v", got)
	}

	// c polls once an hour: after its first load it keeps what it saw.
	c := startReplica(t, envOptions{storeURL: url, sim: sim, pollEvery: time.Hour})
	a.createTeam(t, map[string]any{"name": "brief"})
	if err := c.api.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status, _, b := a.do(t, "DELETE", "/admin/teams/brief", adminKey, nil); status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, b)
	}
	if status, _, b := c.do(t, "POST", "/admin/keys", adminKey, map[string]any{"team": "brief", "name": "late"}); status != http.StatusNotFound {
		t.Fatalf("a key for a team deleted elsewhere: %d %s, want 404", status, b)
	}
}

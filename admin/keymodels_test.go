package admin_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/redisconn/redistest"
)

// narrowYAML gives alpha two of three models and a config key narrowed to one of them; beta
// may use every model.
var narrowYAML = strings.Replace(strings.Replace(testYAML,
	"  - id: sim-long\n", "  - id: sim-long\n  - id: sim-json\n", 1),
	"    limits: {requests_per_minute: 1000}\n    keys:\n      - name: alpha-cfg\n        key: mg-alpha-config-key\n",
	"    limits: {requests_per_minute: 1000}\n    models: [sim-chat, sim-long]\n    keys:\n      - name: alpha-cfg\n        key: mg-alpha-config-key\n"+
		"      - name: alpha-narrow\n        key: mg-alpha-narrow-key\n        models: [sim-long]\n", 1)

func TestIssueKeyWithModels(t *testing.T) {
	r := startReplica(t, envOptions{yaml: narrowYAML})
	cases := []struct {
		name   string
		team   string
		models any
		status int
		code   string
	}{
		{"inside_the_team", "alpha", []string{"sim-chat"}, 201, ""},
		{"team_allows_all", "beta", []string{"sim-json", "sim-chat"}, 201, ""},
		{"empty_is_the_team_list", "alpha", []string{}, 201, ""},
		{"outside_the_team", "alpha", []string{"sim-chat", "sim-json"}, 400, "invalid_model"},
		{"unknown_model", "beta", []string{"gpt-nope"}, 400, "invalid_model"},
		{"empty_id", "beta", []string{""}, 400, "invalid_model"},
		{"control_char", "beta", []string{"sim\nchat"}, 400, "invalid_model"},
		{"listed_twice", "beta", []string{"sim-chat", "sim-chat"}, 400, "invalid_model"},
		{"not_a_list", "beta", "sim-chat", 400, "invalid_json"},
	}
	before := len(r.list(t, "").Keys)
	issued := 0
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := map[string]any{"team": c.team, "name": fmt.Sprintf("k%d", i), "models": c.models}
			status, _, b := r.do(t, "POST", "/admin/keys", adminKey, body)
			if status != c.status || (c.code != "" && !strings.Contains(string(b), `"code":"`+c.code+`"`)) {
				t.Fatalf("%d %s, want %d %s", status, b, c.status, c.code)
			}
			if c.code == "invalid_model" && !strings.Contains(string(b), `"param":"models"`) {
				t.Errorf("refusal names no param: %s", b)
			}
			if status == 201 {
				issued++
			}
		})
	}
	if after := len(r.list(t, "").Keys); after != before+issued {
		t.Fatalf("%d keys listed, want %d: a refused request changed the list", after, before+issued)
	}
}

type modelsListed struct {
	Keys []struct {
		Team, Name string
		Models     []string
	}
}

// TestKeyModelsListedAndEnforced: each key shows its own list (null: the team's), and a
// narrowed key, config or issued, is refused any other model on every model route, as the
// team's allow-list refuses, while the models it keeps work.
func TestKeyModelsListedAndEnforced(t *testing.T) {
	r := startReplica(t, envOptions{yaml: narrowYAML})
	_, issuedSecret := r.issue(t, "alpha", "bot", map[string]any{"models": []string{"sim-chat"}})
	got := map[string]string{}
	for _, k := range getAdmin[modelsListed](t, r, "/admin/keys").Keys {
		got[k.Team+"/"+k.Name] = strings.Join(k.Models, ",")
	}
	want := map[string]string{"alpha/alpha-cfg": "", "alpha/alpha-narrow": "sim-long", "alpha/bot": "sim-chat", "beta/beta-cfg": ""}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("key %s lists models %q, want %q", k, g, w)
		}
	}

	for _, c := range []struct{ key, inside, outside string }{
		{"mg-alpha-narrow-key", "sim-long", "sim-chat"},
		{issuedSecret, "sim-chat", "sim-long"},
	} {
		for _, m := range []string{c.inside, c.outside} {
			wantOK := m == c.inside
			for _, route := range modelRoutes(m) {
				t.Run(route.name+"/"+m, func(t *testing.T) {
					status, _, body := r.do(t, "POST", route.path, c.key, route.body)
					if wantOK && status != http.StatusOK {
						t.Fatalf("allowed model: %d %s", status, body)
					}
					if !wantOK && (status != http.StatusNotFound || !strings.Contains(string(body), "does not exist or you do not have access")) {
						t.Fatalf("model outside the key's list: %d %s, want the allow-list's 404", status, body)
					}
				})
			}
		}
		status, _, body := r.do(t, "GET", "/v1/models", c.key, nil)
		if status != 200 {
			t.Fatalf("/v1/models: %d %s", status, body)
		}
		list := decode[struct{ Data []struct{ ID string } }](t, body)
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, []string{c.inside}) {
			t.Errorf("/v1/models lists %v, want only [%s]", ids, c.inside)
		}
		if status, _, _ := r.do(t, "GET", "/v1/models/"+c.outside, c.key, nil); status != http.StatusNotFound {
			t.Errorf("/v1/models/%s: %d, want 404", c.outside, status)
		}
	}
}

type modelRoute struct {
	name, path string
	body       map[string]any
}

// modelRoutes is one small call of model m on each model route, streamed and not.
func modelRoutes(m string) []modelRoute {
	msgs := []map[string]string{{"role": "user", "content": "hi"}}
	return []modelRoute{
		{"chat", "/v1/chat/completions", map[string]any{"model": m, "messages": msgs}},
		{"chat_stream", "/v1/chat/completions", map[string]any{"model": m, "messages": msgs, "stream": true}},
		{"messages", "/v1/messages", map[string]any{"model": m, "max_tokens": 16, "messages": msgs}},
		{"messages_stream", "/v1/messages", map[string]any{"model": m, "max_tokens": 16, "messages": msgs, "stream": true}},
		{"responses", "/v1/responses", map[string]any{"model": m, "input": "hi"}},
		{"responses_stream", "/v1/responses", map[string]any{"model": m, "input": "hi", "stream": true}},
		{"background", "/v1/responses", map[string]any{"model": m, "input": "hi", "background": true}},
	}
}

// TestKeyModelsSeenBySecondReplica: an issued key's list is stored with it, so another
// replica on the same store enforces it too.
func TestKeyModelsSeenBySecondReplica(t *testing.T) {
	addr := redistest.Start(t).Addr
	url := fmt.Sprintf("redis://%s/0", addr)
	sim := newSim(t)
	a := startReplica(t, envOptions{storeURL: url, sim: sim, yaml: narrowYAML})
	b := startReplica(t, envOptions{storeURL: url, sim: sim, yaml: narrowYAML})
	_, secret := a.issue(t, "beta", "shared", map[string]any{"models": []string{"sim-long"}})
	waitFor(t, time.Second, "the key to work on the second replica", func() bool {
		s, _, _ := b.do(t, "POST", "/v1/responses", secret, map[string]any{"model": "sim-long", "input": "hi"})
		return s == 200
	})
	if got := b.chat(t, secret); got != http.StatusNotFound {
		t.Fatalf("second replica, model outside the key's list: %d, want 404", got)
	}
}

// TestTeamsListTheModelsAKeyMayNarrowTo: the dashboard's issue form offers a team's models,
// which for a team without a list are all the configured ones, so /admin/teams names both.
func TestTeamsListTheModelsAKeyMayNarrowTo(t *testing.T) {
	r := startReplica(t, envOptions{yaml: narrowYAML})
	status, _, b := r.do(t, "GET", "/admin/teams", adminKey, nil)
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	got := decode[struct {
		Models []string
		Teams  []struct {
			Name   string
			Models []string
		}
	}](t, b)
	if want := []string{"sim-chat", "sim-long", "sim-json"}; !slices.Equal(got.Models, want) {
		t.Errorf("models %v, want %v", got.Models, want)
	}
	if len(got.Teams) != 2 || !slices.Equal(got.Teams[0].Models, []string{"sim-chat", "sim-long"}) || len(got.Teams[1].Models) != 0 {
		t.Errorf("teams %+v", got.Teams)
	}
}

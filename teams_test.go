package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// fakeTeamsAdmin records the calls teams makes and answers as modelgate's /admin/teams.
func fakeTeamsAdmin(t *testing.T) *recordingAPI {
	return recordingAdmin(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/admin/teams":
			_, _ = w.Write([]byte(`{"teams":[{"name":"search","source":"config","models":[],"keys":2,"limits":{"requests_per_minute":60},` +
				`"end_user_limits":{},"usage":{"spend_day":0.1,"spend_month":3}},` +
				`{"name":"growth","source":"api","models":["gpt-4o-mini"],"keys":0,"limits":{"spend_per_day":5,"on_budget_exceeded":"clamp"},` +
				`"end_user_limits":{"requests_per_minute":5},"usage":{"spend_day":0.30000000000000004,"spend_month":0.3}}]}`))
		case r.Method == "POST" && r.URL.Path == "/admin/teams":
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"name":"growth","source":"api","models":["gpt-4o-mini"],"limits":{"spend_per_day":5},"end_user_limits":{}}`))
		case r.Method == "PATCH" && r.URL.Path == "/admin/teams/growth":
			_, _ = w.Write([]byte(`{"name":"growth","source":"api","models":[],"limits":{"spend_per_day":1},"end_user_limits":{}}`))
		case r.URL.Path == "/admin/teams/search":
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"error":{"message":"This team is defined in the config file; change it there and reload."}}`))
		case r.Method == "DELETE" && r.URL.Path == "/admin/teams/growth":
			_, _ = w.Write([]byte(`{"name":"growth","deleted":true}`))
		default:
			w.WriteHeader(404)
		}
	})
}

func TestTeamsCommand(t *testing.T) {
	srv := fakeTeamsAdmin(t)
	runCLICases(t, "teams", srv, []cliCase{
		{"list", []string{"list"}, 0, "GET /admin/teams",
			"NAME    SOURCE  MODELS       LIMITS                                    END USER LIMITS        KEYS  SPEND TODAY  SPEND THIS MONTH\n" +
				"search  config  (all)        requests_per_minute=60                    -                      2     0.1          3\n" +
				"growth  api     gpt-4o-mini  spend_per_day=5,on_budget_exceeded=clamp  requests_per_minute=5  0     0.3 of 5     0.3\n", ""},
		{"list_json", []string{"list", "--json"}, 0, "GET /admin/teams", `"teams":[`, ""},
		{"create", []string{"create", "--name", "growth", "--model", "gpt-4o-mini", "--limit", "spend_per_day=5", "--limit", "on_budget_exceeded=clamp",
			"--end-user-limit", "requests_per_minute=5"}, 0,
			`POST /admin/teams {"end_user_limits":{"requests_per_minute":5},"limits":{"on_budget_exceeded":"clamp","spend_per_day":5},"models":["gpt-4o-mini"],"name":"growth"}`,
			"created team growth: models gpt-4o-mini, limits spend_per_day=5, end user limits -\n", ""},
		{"update", []string{"update", "growth", "--limit", "spend_per_day=1", "--limit", "tokens_per_day=", "--all-models"}, 0,
			`PATCH /admin/teams/growth {"limits":{"spend_per_day":1,"tokens_per_day":null},"models":null}`,
			"updated team growth: models (all), limits spend_per_day=1, end user limits -\n", ""},
		{"update_config_team", []string{"update", "search", "--limit", "spend_per_day=1"}, 1, "PATCH /admin/teams/search", "", "409 This team is defined in the config file"},
		{"update_needs_name", []string{"update", "--limit", "spend_per_day=1"}, 2, "", "", "exactly one team name"},
		{"update_models_twice", []string{"update", "growth", "--model", "a", "--all-models"}, 2, "", "", "not both"},
		{"create_empty_value", []string{"create", "--name", "x", "--limit", "spend_per_day="}, 2, "", "", "want name=number"},
		{"bad_limit", []string{"create", "--name", "x", "--limit", "rpm"}, 2, "", "", "want name=value"},
		{"delete", []string{"delete", "growth"}, 0, "DELETE /admin/teams/growth", "deleted team growth\n", ""},
		{"delete_needs_name", []string{"delete"}, 2, "", "", "exactly one team name"},
		{"unknown_sub", []string{"rename"}, 2, "", "", "usage:"},
		{"sub_help", []string{"update", "--help"}, 0, "", "flags of teams update:", ""},
	})
	for _, args := range [][]string{{"teams", "--help"}, {"teams", "-h"}, {"help", "teams"}, {"teams", "list", "--help"}} {
		var stdout bytes.Buffer
		if code := run(args, &stdout, io.Discard); code != 0 || !strings.Contains(stdout.String(), "usage: modelgate teams list") {
			t.Errorf("%v: exit %d, %q", args, code, stdout.String())
		}
	}
	checkNeedsAdminKey(t, "teams", srv.URL)
}

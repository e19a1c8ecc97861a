package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeAdmin records the admin API calls the CLI makes and answers like modelgate.
func fakeAdmin(t *testing.T) *recordingAPI {
	return recordingAdmin(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/admin/keys":
			var req map[string]any
			if json.Unmarshal(body, &req) != nil || req["team"] != "search" {
				w.WriteHeader(404)
				_, _ = w.Write([]byte(`{"error":{"message":"No team of that name is configured."}}`))
				return
			}
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"id":"key_1","team":"search","name":"bot","source":"api","key":"mg-secret-once"}`))
		case r.Method == "GET" && r.URL.Path == "/admin/keys":
			_, _ = w.Write([]byte(`{"keys":[{"id":"config:search:prod","team":"search","name":"prod","source":"config",` +
				`"limits":{"requests_per_minute":0},"usage":{"day_requests":0,"spend_day":0}},` +
				`{"id":"key_1","team":"search","name":"bot","source":"api","last_used_at":"2026-11-26T08:00:00Z",` +
				`"limits":{"requests_per_minute":60,"tokens_per_day":100000,"spend_per_day":2.5,"spend_per_month":40},` +
				`"usage":{"minute_requests":1,"day_requests":12,"spend_day":0.30000000000000004,"spend_month":7.1}}]}`))
		case r.Method == "DELETE" && r.URL.Path == "/admin/keys/key_1":
			_, _ = w.Write([]byte(`{"id":"key_1","team":"search","name":"bot","revoked":true}`))
		case r.Method == "DELETE" && r.URL.Path == "/admin/keys/key_old":
			// an older modelgate answers with the id alone
			_, _ = w.Write([]byte(`{"id":"key_old","revoked":true}`))
		default:
			w.WriteHeader(404)
		}
	})
}

func TestKeysCommand(t *testing.T) {
	srv := fakeAdmin(t)
	cases := []cliCase{
		{"create", []string{"create", "--team", "search", "--name", "bot", "--limit", "spend_per_day=2.5", "--expires-at", "2030-01-02T00:00:00Z"}, 0,
			`POST /admin/keys {"expires_at":"2030-01-02T00:00:00Z","limits":{"spend_per_day":2.5},"name":"bot","team":"search"}`, "key: mg-secret-once", ""},
		{"create_with_models", []string{"create", "--team", "search", "--name", "bot", "--model", "gpt-4o-mini", "--model", "big"}, 0,
			`POST /admin/keys {"models":["gpt-4o-mini","big"],"name":"bot","team":"search"}`, "key: mg-secret-once", ""},
		{"create_unknown_team", []string{"create", "--team", "nope", "--name", "bot"}, 1, `POST /admin/keys`, "", "404 No team of that name"},
		{"list", []string{"list", "--team", "search"}, 0, "GET /admin/keys?team=search",
			"ID                  TEAM    NAME  SOURCE  LIMITS                                                                             REQUESTS TODAY  SPEND TODAY  LAST USED             EXPIRES\n" +
				"config:search:prod  search  prod  config  -                                                                                  0               0            -                     -\n" +
				"key_1               search  bot   api     requests_per_minute=60,tokens_per_day=100000,spend_per_day=2.5,spend_per_month=40  12              0.3 of 2.5   2026-11-26T08:00:00Z  -\n", ""},
		{"list_json", []string{"list", "--json"}, 0, "GET /admin/keys", `"keys":[`, ""},
		{"revoke", []string{"revoke", "key_1"}, 0, "DELETE /admin/keys/key_1", "revoked key key_1 (team search, name bot)\n", ""},
		{"revoke_older_server", []string{"revoke", "key_old"}, 0, "DELETE /admin/keys/key_old", "revoked key key_old\n", ""},
		{"revoke_needs_id", []string{"revoke"}, 2, "", "", "exactly one key id"},
		{"bad_limit", []string{"create", "--team", "search", "--name", "x", "--limit", "rpm"}, 2, "", "", "want name=number"},
		{"unknown_sub", []string{"rotate"}, 2, "", "", "usage:"},
		{"sub_help", []string{"list", "--help"}, 0, "", "flags of keys list:", ""},
		{"create_help", []string{"create", "-h"}, 0, "", "--limit stringArray", ""},
	}
	runCLICases(t, "keys", srv, cases)
	checkNeedsAdminKey(t, "keys", srv.URL)
}

func TestCheckWarnsSpendWithoutPrice(t *testing.T) {
	path := writeFile(t, "upstream:\n  gateway_url: http://gw\n  base_url: http://api\n  api_key: sk-x\n"+
		"models:\n  - id: priced\n    price: {input: 1, output: 2}\n  - id: free\n"+
		"teams:\n  - name: search\n    limits: { spend_per_day: 5 }\n    keys:\n      - name: k\n        key: mg-k\n"+
		"  - name: other\n    models: [priced]\n    limits: { spend_per_month: 5 }\n    keys:\n      - name: k\n        key: mg-k2\n")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "--config", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if w := stderr.String(); !strings.Contains(w, "warning: team search has a spend limit but may use models without a price (free)") || strings.Contains(w, "team other has a spend limit") {
		t.Errorf("warnings: %q", w)
	}
}

// The CLI never follows a redirect: the admin key would go with it to whatever port or
// scheme the Location names.
func TestKeysCommandRefusesRedirects(t *testing.T) {
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	t.Cleanup(other.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	t.Setenv(adminKeyEnv, fakeAdminKey)
	for _, args := range [][]string{{"list"}, {"create", "--team", "search", "--name", "bot"}, {"revoke", "key_1"}} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"keys"}, append(args, "--url", redirector.URL)...), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "redirect") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the admin key was sent to the redirect's target %d times", n)
	}
}

// Spend is priced per token: a key that spent millionths must not read as one that spent
// nothing, and float noise must not show.
func TestSpentToday(t *testing.T) {
	cases := []struct {
		spent  float64
		limits keyLimits
		want   string
	}{
		{0, keyLimits{}, "0"},
		{0.000042, keyLimits{}, "0.000042"},
		{0.0000004, keyLimits{}, "0"},
		{0.30000000000000004, keyLimits{SpendPerDay: 2.5}, "0.3 of 2.5"},
		{12.125, keyLimits{SpendPerDay: 25, SpendPerMonth: 500}, "12.125 of 25"},
	}
	for _, c := range cases {
		if got := spentToday(c.spent, c.limits); got != c.want {
			t.Errorf("spentToday(%v, %+v) = %q, want %q", c.spent, c.limits, got, c.want)
		}
	}
}

// recordingAPI is a fake admin API and the calls it got, in order; the CLI a test runs
// against it makes its calls one at a time.
type recordingAPI struct {
	*httptest.Server
	calls []string
}

// fakeAdminKey is the admin key a fake admin API takes, which the test gives the CLI.
const fakeAdminKey = "mg-admin-cli"

// recordingAdmin is a fake admin API, for a CLI given fakeAdminKey (set in adminKeyEnv for the
// test): it records each call as "METHOD URI BODY" in calls, refuses one without the key as
// modelgate does, and answers the others through answer, which gets the body read.
func recordingAdmin(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *recordingAPI {
	t.Helper()
	t.Setenv(adminKeyEnv, fakeAdminKey)
	api := &recordingAPI{}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		api.calls = append(api.calls, r.Method+" "+r.URL.RequestURI()+" "+strings.TrimSpace(string(body)))
		if r.Header.Get("Authorization") != "Bearer "+fakeAdminKey {
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":{"message":"This route needs an admin key."}}`))
			return
		}
		answer(w, r, body)
	}))
	t.Cleanup(api.Close)
	return api
}

// cliCase is one run of an admin CLI command (keys, teams) against a fake admin API.
type cliCase struct {
	name     string
	args     []string
	code     int
	call     string // the request the CLI must have sent
	out, err string
}

// runCLICases runs each case as `modelgate <command> <args> --url <srv>` and checks its exit
// code, the one admin call it made (none when call is empty), and what it wrote.
func runCLICases(t *testing.T, command string, srv *recordingAPI, cases []cliCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.calls = nil
			var stdout, stderr bytes.Buffer
			code := run(append([]string{command}, append(c.args, "--url", srv.URL)...), &stdout, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, stderr.String())
			}
			got := srv.calls
			if c.call == "" && len(got) != 0 || c.call != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.call)) {
				t.Errorf("calls %q, want %q", got, c.call)
			}
			if !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
				t.Errorf("stdout %q stderr %q, want %q / %q", stdout.String(), stderr.String(), c.out, c.err)
			}
		})
	}
}

// checkNeedsAdminKey: with the admin key's variable empty, `<command> list` refuses to run
// (exit 2) and names the variable.
func checkNeedsAdminKey(t *testing.T, command, url string) {
	t.Helper()
	t.Setenv(adminKeyEnv, "")
	var stderr bytes.Buffer
	if code := run([]string{command, "list", "--url", url}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), adminKeyEnv) {
		t.Errorf("without the admin key: exit %d, %s", code, stderr.String())
	}
}

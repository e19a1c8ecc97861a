package proxy

import (
	"strings"
	"testing"

	"modelgate/config"
)

// TestStoredScopeKey: under responses.scope: key a kept response is the creating key's
// alone. Another key of the same team gets, on every route, exactly what an unknown id
// gets; under the default (team) every key of the team sees it.
func TestStoredScopeKey(t *testing.T) {
	for _, scope := range []string{"team", "key"} {
		t.Run(scope, func(t *testing.T) {
			env := storedEnv(t, func(c *config.Config) { c.Responses.Scope = scope }, nil)
			id := turn(t, env, keyAlpha1, `{"model":"gpt-4o-mini","input":"mine"}`)
			// An id of the same length that names nothing, so the two answers can be compared
			// byte for byte once the ids are swapped.
			unknown := id[:len(id)-4] + "zzzz"
			probes := []struct{ method, path, body string }{
				{"GET", "/v1/responses/%s", ""},
				{"GET", "/v1/responses/%s/input_items", ""},
				{"POST", "/v1/responses/%s/cancel", ""},
				{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"next","previous_response_id":"%s"}`},
				{"DELETE", "/v1/responses/%s", ""}, // last: a team-scoped delete removes it
			}
			for _, pr := range probes {
				fill := func(v string) (string, []byte) {
					path, body := pr.path, pr.body
					if strings.Contains(path, "%s") {
						path = strings.Replace(path, "%s", v, 1)
					}
					return path, []byte(strings.Replace(body, "%s", v, 1))
				}
				path, body := fill(id)
				gotStatus, _, got := env.do(t, pr.method, path, keyAlpha2, body)
				upath, ubody := fill(unknown)
				wantStatus, _, want := env.do(t, pr.method, upath, keyAlpha2, ubody)
				sameAsUnknown := gotStatus == wantStatus && strings.ReplaceAll(string(got), id, unknown) == string(want)
				if scope == "key" && !sameAsUnknown {
					t.Errorf("%s %s by another key: %d %s; unknown id: %d %s", pr.method, pr.path, gotStatus, got, wantStatus, want)
				}
				if scope == "team" && sameAsUnknown {
					t.Errorf("%s %s by another key of the team: answered as unknown: %d %s", pr.method, pr.path, gotStatus, got)
				}
			}
			// The creating key still has it under key scope.
			status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil)
			if scope == "key" && status != 200 {
				t.Fatalf("the creating key lost its response: %d %s", status, b)
			}
		})
	}
}

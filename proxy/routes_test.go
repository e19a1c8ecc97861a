package proxy

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/routing"
	"modelgate/store"
	"modelgate/translate"
)

// routesYAML has a canary split 9:1 and a sticky A/B model per user and per conversation.
const routesYAML = apitest.SimUpstreamYAML + `models:
  - id: canary
    routes:
      - {upstream: sim-chat, weight: 9}
      - {upstream: sim-canary, weight: 1}
  - id: ab-user
    routes: [{upstream: sim-a, weight: 1}, {upstream: sim-b, weight: 1}]
    sticky: user
  - id: ab-convo
    routes: [{upstream: sim-a, weight: 1}, {upstream: sim-b, weight: 1}]
    sticky: conversation
  - id: plain
    upstream: sim-chat
` + alphaTeamYAML + betaTeamYAML

// routeRequest is one model call on one of the routes, in its own dialect.
type routeRequest struct {
	name, path string
	body       func(model, user, firstMsg string) string
}

var routeRequests = []routeRequest{
	{"chat", "/v1/chat/completions", func(m, u, first string) string {
		return fmt.Sprintf(`{"model":%q,"user":%q,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":%q}]}`, m, u, first)
	}},
	{"chat_stream", "/v1/chat/completions", func(m, u, first string) string {
		return fmt.Sprintf(`{"model":%q,"stream":true,"user":%q,"messages":[{"role":"user","content":%q}]}`, m, u, first)
	}},
	{"messages", "/v1/messages", func(m, u, first string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":32,"metadata":{"user_id":%q},"messages":[{"role":"user","content":%q}]}`, m, u, first)
	}},
	{"messages_stream", "/v1/messages", func(m, u, first string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":32,"stream":true,"metadata":{"user_id":%q},"messages":[{"role":"user","content":%q}]}`, m, u, first)
	}},
	{"responses", "/v1/responses", func(m, u, first string) string {
		return fmt.Sprintf(`{"model":%q,"user":%q,"input":[{"role":"user","content":%q}]}`, m, u, first)
	}},
	{"responses_stream", "/v1/responses", func(m, u, first string) string {
		return fmt.Sprintf(`{"model":%q,"stream":true,"user":%q,"input":[{"role":"user","content":%q}]}`, m, u, first)
	}},
}

// simModels is the upstream model of every call the simulated platform received, in order.
func simModels(env *testEnv) []string {
	var out []string
	for _, r := range env.sim.Requests() {
		if strings.HasSuffix(r.Path, "/responses") {
			out = append(out, gjson.GetBytes(r.Body, "model").Str)
		}
	}
	return out
}

// oneRoute fails t unless the platform calls in got (the models they named) all went to one
// route, and returns it; who and want word the failure.
func oneRoute(t *testing.T, got []string, who, want string) string {
	t.Helper()
	if len(got) == 0 {
		t.Fatalf("%s made no platform call", who)
	}
	for _, m := range got {
		if m != got[0] {
			t.Fatalf("%s went to %v: want %s", who, got, want)
		}
	}
	return got[0]
}

// callRoute sends one call and fails t unless it is answered 200. Chat and Messages answers
// name the client's model; a Responses answer is passed through as the platform wrote it, so
// it names the route's model, as it names the platform's model behind any alias.
func callRoute(t *testing.T, env *testEnv, rr routeRequest, model, user, first string) bool {
	t.Helper()
	status, h, body := env.do(t, http.MethodPost, rr.path, keyAlpha1, []byte(rr.body(model, user, first)))
	if status != http.StatusOK {
		t.Errorf("%s: status %d: %s", rr.name, status, body)
		return false
	}
	if got := gjson.GetBytes(body, "model").Str; !strings.Contains(h.Get("Content-Type"), "event-stream") &&
		rr.path != "/v1/responses" && got != model {
		t.Errorf("%s: the answer names model %q, want the client's %q", rr.name, got, model)
		return false
	}
	return true
}

// TestWeightedRoutesCanarySplit: a 9:1 canary shows in what the platform received, on every
// route, streamed and not; the client sees its own model id, and the log names the route.
func TestWeightedRoutesCanarySplit(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML})
	const perRoute = 200
	var wg sync.WaitGroup
	for _, rr := range routeRequests {
		wg.Go(func() {
			for i := range perRoute {
				if !callRoute(t, env, rr, "canary", "", fmt.Sprint("hello ", i)) {
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	counts := map[string]int{}
	for _, m := range simModels(env) {
		counts[m]++
	}
	calls := perRoute * len(routeRequests)
	if counts["sim-chat"]+counts["sim-canary"] != calls || len(counts) != 2 {
		t.Fatalf("the platform received %v, want %d calls to sim-chat and sim-canary only", counts, calls)
	}
	// 1200 calls at 10%: one standard deviation is 0.87 points; 4 points is far outside chance.
	if got := float64(counts["sim-canary"]) / float64(calls); math.Abs(got-0.10) > 0.04 {
		t.Fatalf("the canary got %.3f of the calls (%v), want 0.10±0.04", got, counts)
	}
	logs := env.logs.String()
	for _, want := range []string{`"upstream_model":"sim-canary"`, `"upstream_model":"sim-chat"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line has %s", want)
		}
	}
	// A model without routes logs as it always did.
	seen := len(logs)
	callRoute(t, env, routeRequests[0], "plain", "", "hi")
	if line := env.logs.String()[seen:]; strings.Contains(line, "upstream_model") {
		t.Errorf("a model without routes logs upstream_model: %s", line)
	}
}

// TestStickyUserRoutes: a user stays on one route across every route of the API and every
// call while it is healthy (chat's user, Messages' metadata.user_id and Responses' user are
// one user); when the route's breaker opens only its users move, and they come back.
func TestStickyUserRoutes(t *testing.T) {
	health := &openBreakers{}
	env := startEnv(t, envOptions{yaml: routesYAML, health: health})
	const users = 24
	placeAll := func() map[string]string {
		env.sim.Reset()
		placed := map[string]string{}
		for u := range users {
			user := fmt.Sprint("user-", u)
			for _, rr := range routeRequests {
				if !callRoute(t, env, rr, "ab-user", user, "hi") {
					t.FailNow()
				}
			}
			placed[user] = oneRoute(t, simModels(env), user+" across the routes", "one route")
			env.sim.Reset()
		}
		return placed
	}
	before := placeAll()
	onB := 0
	for _, m := range before {
		if m == "sim-b" {
			onB++
		}
	}
	if onB == 0 || onB == users {
		t.Fatalf("all %d users on one route (%v): the split does not split", users, before)
	}
	if again := placeAll(); fmt.Sprint(again) != fmt.Sprint(before) {
		t.Fatalf("users moved while healthy:\nbefore %v\nafter  %v", before, again)
	}

	health.set("sim-b")
	during := placeAll()
	for user, m := range during {
		if m != "sim-a" {
			t.Errorf("%s is on %s while its breaker is open", user, m)
		}
	}
	health.set()
	if after := placeAll(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("users did not come back once healthy:\nbefore %v\nafter  %v", before, after)
	}

	// With every route open a call still goes out, to the user's usual route.
	health.set("sim-a", "sim-b")
	if all := placeAll(); fmt.Sprint(all) != fmt.Sprint(before) {
		t.Fatalf("with every route open, want the usual routes:\nbefore %v\ngot    %v", before, all)
	}
}

// TestStickyWithoutUserFollowsTheCallerKey: a request naming no user is placed by its caller's
// key, so one key's calls stay together.
func TestStickyWithoutUserFollowsTheCallerKey(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML})
	for _, key := range []string{keyAlpha1, keyAlpha2, keyBeta} {
		env.sim.Reset()
		for range 8 {
			status, _, body := env.do(t, http.MethodPost, "/v1/chat/completions", key,
				[]byte(`{"model":"ab-user","messages":[{"role":"user","content":"hi"}]}`))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
		}
		oneRoute(t, simModels(env), "one key's calls without a user", "one route")
	}
}

// TestStickyConversationRoutes: the turns of one conversation stay on one route: a chat
// resending its history from the same first user message, a Messages conversation, and a
// Responses conversation by its prompt_cache_key (what the Codex CLI sends).
func TestStickyConversationRoutes(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML})
	routesSeen := map[string]bool{}
	for c := range 16 {
		first := fmt.Sprintf("conversation %d starts here", c)
		turns := []struct{ path, body string }{
			{"/v1/chat/completions", fmt.Sprintf(`{"model":"ab-convo","messages":[{"role":"system","content":"shared"},{"role":"user","content":%q}]}`, first)},
			{"/v1/chat/completions", fmt.Sprintf(`{"model":"ab-convo","messages":[{"role":"system","content":"shared"},{"role":"user","content":%q},{"role":"assistant","content":"ok"},{"role":"user","content":"and then?"}]}`, first)},
			{"/v1/messages", fmt.Sprintf(`{"model":"ab-convo","max_tokens":16,"messages":[{"role":"user","content":%q},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`, first)},
		}
		env.sim.Reset()
		for _, turn := range turns {
			if status, _, body := env.do(t, http.MethodPost, turn.path, keyAlpha1, []byte(turn.body)); status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
		}
		routesSeen[oneRoute(t, simModels(env), fmt.Sprintf("conversation %d", c), "one route for all its turns")] = true

		env.sim.Reset()
		for turn := range 3 {
			body := fmt.Sprintf(`{"model":"ab-convo","prompt_cache_key":"session-%d","input":"turn %d"}`, c, turn)
			if status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(body)); status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
		}
		oneRoute(t, simModels(env), fmt.Sprintf("session-%d", c), "one route for its prompt_cache_key")
	}
	if len(routesSeen) != 2 {
		t.Fatalf("16 conversations all went to %v", routesSeen)
	}
}

// TestCountTokensOnRoutedModel: count_tokens estimates a routed model like any other, and
// sends nothing upstream.
func TestCountTokensOnRoutedModel(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML})
	for _, model := range []string{"canary", "ab-user", "ab-convo"} {
		status, _, body := env.do(t, http.MethodPost, "/v1/messages/count_tokens", keyAlpha1,
			[]byte(`{"model":"`+model+`","messages":[{"role":"user","content":"count me"}]}`))
		if status != http.StatusOK || gjson.GetBytes(body, "input_tokens").Int() <= 0 {
			t.Fatalf("%s: status %d: %s", model, status, body)
		}
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Fatalf("count_tokens sent %d calls upstream", n)
	}
}

// TestStickyConversationThroughStoredChainAndBackground: with responses kept by modelgate,
// the turns of a previous_response_id chain (each sending only its new input) stay on the
// first turn's route, and a background response is routed when submitted and run there.
func TestStickyConversationThroughStoredChainAndBackground(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML, store: tempBolt(t, store.BoltOptions{})})
	t.Cleanup(env.server.Close)
	placed := map[string]bool{}
	for c := range 12 {
		env.sim.Reset()
		prev := ""
		for turn := range 3 {
			body := fmt.Sprintf(`{"model":"ab-convo","input":[{"role":"user","content":"chain %d turn %d"}]}`, c, turn)
			if prev != "" {
				body = fmt.Sprintf(`{"model":"ab-convo","previous_response_id":%q,"input":[{"role":"user","content":"chain %d turn %d"}]}`, prev, c, turn)
			}
			status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(body))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			prev = gjson.GetBytes(b, "id").Str
		}
		placed[oneRoute(t, simModels(env), fmt.Sprintf("chain %d", c), "its first turn's route for every turn")] = true
	}
	if len(placed) != 2 {
		t.Fatalf("12 chains all went to %v", placed)
	}

	env.sim.Reset()
	q := submit(t, env, keyAlpha1, `{"model":"canary","input":"later","background":true}`)
	pollUntil(t, env, keyAlpha1, q.Get("id").Str, "completed")
	if got := simModels(env); len(got) != 1 || (got[0] != "sim-chat" && got[0] != "sim-canary") {
		t.Fatalf("the background response reached the platform as %v, want one of the canary's routes", got)
	}
}

// The sticky key of a chat request is what its one parse read: a large body is read once,
// a deep hostile one is refused by the parse and never read again, and an end user longer
// than translate.MaxIdentityLen is placed by its first MaxIdentityLen bytes.
func TestStickyKeyComesFromTheParse(t *testing.T) {
	models := newModelTable([]config.Model{
		{ID: "canary", Routes: []config.Route{{Upstream: "a", Weight: 1}, {Upstream: "b", Weight: 1}}, Sticky: config.StickyUser}})
	pad := strings.Repeat(`{"role":"user","content":"x"},`, maxPeek/30+1)
	long := strings.Repeat("u", translate.MaxIdentityLen)
	for _, tc := range []struct {
		name string
		body string
		want stickyKey // zero: the parse refuses the body
	}{
		{"small", `{"model":"canary","user":"u-1","messages":[{"role":"user","content":"y"}]}`, routing.StringKey("u-1")},
		{"large", `{"model":"canary","user":"u-1","messages":[` + pad + `{"role":"user","content":"y"}]}`, routing.StringKey("u-1")},
		{"long_user_cut", `{"model":"canary","user":"` + long + `-and-more","messages":[{"role":"user","content":"y"}]}`, routing.StringKey(long)},
		{"deep", `{"model":"canary","user":"u-1","messages":` + strings.Repeat("[", maxPeek+1), stickyKey{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := translate.ParseChat([]byte(tc.body))
			if !tc.want.OK {
				if err == nil {
					t.Fatal("the parse accepted a body nested deeper than its bound")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := models.identityKey("canary", &req.Identity); got != tc.want {
				t.Errorf("key %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRoutesDocumented: every route the server mounts, admin routes included, has its row in
// docs/routes.md's table, written as the docs write routes ("`GET /v1/responses/{id}`"), so that a
// route added without its row fails here.
func TestRoutesDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/routes.md")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder // the rows of the route table, not the prose
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "| `") {
			table.WriteString(line)
		}
	}
	doc := table.String()
	d := benchDeps(t, benchUpstream(t, ""), "")
	d.Admin = http.NotFoundHandler() // mounts the admin API's routes
	s := benchServer(t, d)
	routes := s.engine.Routes()
	if len(routes) < 20 {
		t.Fatalf("only %d routes mounted", len(routes))
	}
	for _, r := range routes {
		path := r.Path
		catchAll := false
		if i := strings.Index(path, "/*"); i >= 0 {
			path = path[:i+1] // a catch-all is documented by its prefix: /admin/ui/
			catchAll = true
		}
		parts := strings.Split(path, "/")
		for i, p := range parts {
			if name, ok := strings.CutPrefix(p, ":"); ok {
				parts[i] = "{" + name + "}"
			}
		}
		want := "`" + r.Method + " " + strings.Join(parts, "/")
		if catchAll && strings.Contains(doc, want) {
			continue // and then its rows: /v1beta/models/{model}:generateContent
		}
		if !strings.Contains(doc, want+"`") && !strings.Contains(doc, want+" ") {
			t.Errorf("docs/routes.md has no row for %s %s (looked for %s`)", r.Method, r.Path, want)
		}
	}
}
